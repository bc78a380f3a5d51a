opt_model = torch.compile(init_model(), fullgraph=True)
print(opt_model(generate_data(16)[0]))
