"""SG-OPT (Kim et al., 2021): self-guided contrastive learning."""

from kcse import arguments
from kcse.experiments.methods.method import Flag
from kcse.experiments.methods.method import Method


class SGOptMethod(Method):
    """SG-OPT with the protocol's temperature (SG-OPT: 0.01).

    Args:
        projection_dim: width of the projection head.
        regularization: λ on Σ‖θ_T − θ_F‖².
    """

    name = "sg_opt"
    title = "SG-OPT"
    # SG-OPT's temperature, batch and lr; BERT's own dropout.
    protocol_defaults = {"temperature": 0.01, "batch_size": 16,
                         "learning_rate": 5e-5, "hidden_dropout": 0.1}
    flag_group = "SG-OPT"
    flags = (
        Flag("--projection-dim", type=arguments.positive_integer, default=4096,
             help="width of the projection head (4096)"),
        Flag("--regularization", type=arguments.non_negative_number, default=0.1,
             help="λ on Σ‖θ_T − θ_F‖² (0.1)"),
    )

    def __init__(self, projection_dim=4096, regularization=0.1, rematerialize=False):
        super().__init__(rematerialize)
        self.projection_dim = projection_dim
        self.regularization = regularization

    @classmethod
    def from_args(cls, args, rematerialize=False):
        return cls(args.projection_dim, args.regularization, rematerialize)

    def objective(self, encoder, protocol):
        from kcse.objectives.sg_opt import SGOpt

        return SGOpt(encoder, self.projection_dim, protocol.temperature,
                     self.regularization, rematerialize=self.rematerialize)

    def settings(self):
        return super().settings() | {
            "projection_dim": self.projection_dim,
            "regularization": self.regularization,
        }
