opt_bar = dynamo.optimize("inductor", nopython=True)(bar)
try:
    opt_bar(torch.randn(10), torch.randn(10))
except:
    tb.print_exc()
