def eval(mod, inp):
    return mod(inp)

model = init_model()
eval_opt = dynamo.optimize("inductor")(eval)

inp = generate_data(16)[0]
print("eager:", timed(lambda: eval(model, inp))[1])
print("dynamo:", timed(lambda: eval_opt(model, inp))[1])
