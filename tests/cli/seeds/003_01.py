import torch
import torch._dynamo as dynamo
