dynamo_f3 = dynamo.optimize("inductor")(f3)
print("dynamo 3:", test_fns(f3, dynamo_f3, (inp2,)))
