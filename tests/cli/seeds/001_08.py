input = torch.randn((5, 5, 5), requires_grad=True)
output = naive_two_cosine(input)
