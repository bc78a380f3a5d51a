dynamo_f2 = dynamo.optimize("inductor")(f2)
print("dynamo 2:", test_fns(f2, dynamo_f2, (inp1, inp2)))
print("~" * 10)
