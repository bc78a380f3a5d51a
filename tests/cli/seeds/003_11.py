import traceback as tb
try:
    torch.fx.symbolic_trace(f1)
except:
    tb.print_exc()
