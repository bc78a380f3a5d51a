model = init_model()
opt = torch.optim.Adam(model.parameters())

def train(mod, data):
    pred = mod(data[0])
    loss = torch.nn.CrossEntropyLoss()(pred, data[1])
    loss.backward()

eager_times = []
for i in range(N_ITERS):
    inp = generate_data(16)
    opt.zero_grad(True)
    _, eager_time = timed(lambda: train(model, inp))
    opt.step()
    eager_times.append(eager_time)
    print(f"eager train time {i}: {eager_time}")
print("~" * 10)

model = init_model()
opt = torch.optim.Adam(model.parameters())
train_opt = dynamo.optimize("inductor")(train)

dynamo_times = []
for i in range(N_ITERS):
    inp = generate_data(16)
    opt.zero_grad(True)
    _, dynamo_time = timed(lambda: train_opt(model, inp))
    opt.step()
    dynamo_times.append(dynamo_time)
    print(f"dynamo train time {i}: {dynamo_time}")
print("~" * 10)

eager_med = np.median(eager_times)
dynamo_med = np.median(dynamo_times)
speedup = eager_med / dynamo_med
print(f"(train) eager median: {eager_med}, dynamo median: {dynamo_med}, speedup: {speedup}x")
print("~" * 10)
