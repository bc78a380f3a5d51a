opt_model = dynamo.optimize("inductor", nopython=True)(init_model())
print(opt_model(generate_data(16)[0]))
