dynamo_f1 = dynamo.optimize("inductor")(f1)
print("dynamo 1, 1:", test_fns(f1, dynamo_f1, (inp1, inp2)))
print("dynamo 1, 2:", test_fns(f1, dynamo_f1, (-inp1, inp2)))
print("~" * 10)
