input = torch.randn((5, 5, 5), requires_grad=True)
output = optimized_two_cosine(input)
