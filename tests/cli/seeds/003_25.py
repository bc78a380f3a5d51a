try:
    dynamo.export(bar, torch.randn(10), torch.randn(10))
except:
    tb.print_exc()

model_exp = dynamo.export(init_model(), generate_data(16)[0])
print(model_exp[0](generate_data(16)[0]))
