eager_times = []
dynamo_times = []
for i in range(N_ITERS):
    inp = generate_data(16)[0]
    _, eager_time = timed(lambda: eval(model, inp))
    eager_times.append(eager_time)
    print(f"eager eval time {i}: {eager_time}")

print("~" * 10)

dynamo_times = []
for i in range(N_ITERS):
    inp = generate_data(16)[0]
    _, dynamo_time = timed(lambda: eval_opt(model, inp))
    dynamo_times.append(dynamo_time)
    print(f"dynamo eval time {i}: {dynamo_time}")
print("~" * 10)

import numpy as np
eager_med = np.median(eager_times)
dynamo_med = np.median(dynamo_times)
speedup = eager_med / dynamo_med
print(f"(eval) eager median: {eager_med}, dynamo median: {dynamo_med}, speedup: {speedup}x")
print("~" * 10)
