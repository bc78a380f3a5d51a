explanation, out_guards, graphs, ops_per_graph, break_reasons, explanation_verbose = dynamo.explain(
    bar, torch.randn(10), torch.randn(10)
)
print(explanation_verbose)
