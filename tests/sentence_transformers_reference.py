"""The optimizer of sentence-transformers' `fit` (0.3.9), which yym6472/ConSERT's
`main.py` and galsang/SG-BERT's `training.py` train with, in torch.

`TransformersAdamW` is Hugging Face's `transformers.AdamW` of transformers 3.4
/ 3.5 (the versions in those repositories' requirements.txt; later
transformers removed the class), transcribed line by line; `fit_steps` is
the loop of `SentenceTransformer.fit`: parameters grouped by
`no_decay = ['bias', 'LayerNorm.bias', 'LayerNorm.weight']`, gradients
clipped to `max_grad_norm=1`, `optimizer.step()`, then
`transformers.get_linear_schedule_with_warmup`'s `scheduler.step()`.
"""

import math

import torch
import transformers


class TransformersAdamW(torch.optim.Optimizer):
    """transformers 3.4's `AdamW` (`optimization.py`)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0,
                 correct_bias=True):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        correct_bias=correct_bias)
        super().__init__(params, defaults)

    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.data
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p.data)
                    state["exp_avg_sq"] = torch.zeros_like(p.data)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                beta1, beta2 = group["betas"]
                state["step"] += 1
                exp_avg.mul_(beta1).add_(grad, alpha=1.0 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
                denom = exp_avg_sq.sqrt().add_(group["eps"])
                step_size = group["lr"]
                if group["correct_bias"]:
                    bias_correction1 = 1.0 - beta1 ** state["step"]
                    bias_correction2 = 1.0 - beta2 ** state["step"]
                    step_size = step_size * math.sqrt(bias_correction2) / bias_correction1
                p.data.addcdiv_(exp_avg, denom, value=-step_size)
                if group["weight_decay"] > 0.0:
                    p.data.add_(p.data, alpha=-group["lr"] * group["weight_decay"])


def grouped_parameters(named_parameters, weight_decay=0.01):
    """`SentenceTransformer.fit`'s parameter groups."""
    no_decay = ["bias", "LayerNorm.bias", "LayerNorm.weight"]
    return [
        {"params": [p for n, p in named_parameters if not any(nd in n for nd in no_decay)],
         "weight_decay": weight_decay},
        {"params": [p for n, p in named_parameters if any(nd in n for nd in no_decay)],
         "weight_decay": 0.0},
    ]


def fit_steps(named_arrays, gradients, optimizer_params, warmup_steps, total_steps,
              max_grad_norm=1):
    """The parameters after each of `fit`'s steps, and each step's learning rate.

    `named_arrays`: `{Hugging Face name: numpy array}`; `gradients`: one
    `{name: array}` per step; `optimizer_params`: the script's (`lr`,
    `eps`, `correct_bias`, `betas`).
    """
    parameters = {name: torch.nn.Parameter(torch.tensor(array, dtype=torch.float64))
                  for name, array in named_arrays.items()}
    optimizer = TransformersAdamW(grouped_parameters(list(parameters.items())),
                                  **optimizer_params)
    scheduler = transformers.get_linear_schedule_with_warmup(
        optimizer, num_warmup_steps=warmup_steps, num_training_steps=total_steps)
    after, rates = [], []
    for step in gradients:
        for name, parameter in parameters.items():
            parameter.grad = torch.tensor(step[name], dtype=torch.float64)
        torch.nn.utils.clip_grad_norm_(list(parameters.values()), max_grad_norm)
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
        after.append({name: p.detach().numpy().copy() for name, p in parameters.items()})
    return after, rates
