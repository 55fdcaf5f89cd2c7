"""A sentence-transformers folder read back as the encoder it holds.

`SentenceTransformer(folder)` runs the modules its `modules.json` lists;
kcse reads the same list into a `SentenceEncoder`'s settings, the inverse
of `kcse.export.sentence_transformers`' table:

| modules after `Transformer` | kcse |
|---|---|
| `Pooling` cls / mean / max | pooling `cls` / `last_avg` / `max` |
| `WeightedLayerPooling` (weight on blocks 1 and L, 0 between) + mean `Pooling` | `first_last_avg` |
| the same on blocks L-1 and L | `last2avg` |
| cls `Pooling` + `Dense` hidden→hidden, tanh, or identity holding the backbone's own pooler | `pooler` (P2), `pooler_activation` tanh / linear; the Dense's weights are the pooler |
| `Dense` identity, kernel W, bias b (= −μW) | `kcse.layers.Whitening`: kernel W, mean μ = −b W⁺ |
| `Normalize` (last) | `normalize=True` |

and `config_sentence_transformers.json`'s `prompts` and
`default_prompt_name`, `sentence_bert_config.json`'s `max_seq_length`
(sentence-transformers 5: `tokenizer_config.json`'s `model_max_length`).
Anything else (another module type, a pooling mode kcse lacks such as
`mean_sqrt_len_tokens`, `weightedmean` or `lasttoken`, a `Dense` with
another activation or in another place) raises a `ValueError` naming
`modules.json` and the module: the folder computes something kcse would
not. `read_folder` reads JSON and safetensors headers, and the small
`Dense` and `WeightedLayerPooling` weights (numpy), so the commands check
`--model` with it before TensorFlow starts.

Example:
```python
import keras_hub
import kcse
from kcse.models.sentence_transformers_folder import read_folder

vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat"]
preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
    keras_hub.models.BertTokenizer(vocabulary=vocabulary), sequence_length=8)
backbone = kcse.models.BertBackbone(
    vocabulary_size=len(vocabulary), num_layers=2, num_heads=2,
    hidden_dim=8, intermediate_dim=16, max_sequence_length=8)
encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="P4", normalize=True)
encoder.export("st-folder", format="sentence_transformers")
modules = read_folder("st-folder")
assert (modules.pooling, modules.normalize, modules.max_seq_length) == (
    "first_last_avg", True, 8)
back = kcse.SentenceEncoder.from_preset("st-folder")  # pooling P4, normalised
```
"""

import dataclasses
import json
import pathlib

import numpy as np

from kcse.models.huggingface_folder import TOKENIZER_CONFIG_FILE
from kcse.models.huggingface_folder import WEIGHTS_FILE
from kcse.models.huggingface_folder import check_huggingface_folder
from kcse.models.huggingface_folder import read_json_object
from kcse.models.huggingface_folder import safetensors_shapes

MODULES_FILE = "modules.json"
PROMPTS_FILE = "config_sentence_transformers.json"
TRANSFORMER_SETTINGS_FILE = "sentence_bert_config.json"
# sentence-transformers' `Pooling` modes (its legacy boolean keys, then its
# own names) -> kcse's pooling; the others have no kcse pooling.
LEGACY_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken",
}
KCSE_POOLING = {"cls": "cls", "mean": "last_avg", "max": "max"}
# The module types kcse's encoder has (in this order).
KNOWN_MODULES = ("Transformer", "WeightedLayerPooling", "Pooling", "Dense", "Normalize")
IDENTITY = "torch.nn.modules.linear.Identity"
TANH = "torch.nn.modules.activation.Tanh"
# Relative error of −b W⁺ W against b above which a Dense's bias is not a whitening's.
BIAS_TOLERANCE = 1e-4


@dataclasses.dataclass(frozen=True)
class FolderModules:
    """What a sentence-transformers folder computes, in kcse's terms.

    `transformer`: the folder of the `Transformer` module (the backbone
    and tokenizer; the folder itself for kcse's exports). `pooling`,
    `pooler_activation`, `normalize`: `SentenceEncoder`'s arguments;
    `poolings`: every kcse pooling name that computes the same (two blocks:
    `first_last_avg` is `last2avg`). `pooler` and `whitening`: the
    `(kernel [in, out], bias)` float64 arrays of those Dense modules, or
    None. `max_seq_length`: `sentence_bert_config.json`'s, or None.
    `modules_file`: the folder's `modules.json`.
    """

    modules_file: str
    transformer: str
    pooling: str
    poolings: tuple
    pooler_activation: str = "linear"
    pooler: tuple = None
    whitening: tuple = None
    normalize: bool = False
    max_seq_length: int = None

    def check_arguments(self, pooling=None, pooler_activation=None, whitening=None,
                        normalize=None):
        """Raises `ValueError` for a setting given that is not the folder's.

        The folder keeps its modules, as a `.keras` file keeps its pooling:
        a pooling, pooler activation or normalisation given must be the
        folder's; a whitening can be given only where the folder has none.
        """
        problem = None if pooling is None else self.pooling_problem(pooling)
        if problem is not None:
            raise ValueError(f"pooling {pooling!r}: {problem}")
        if (pooler_activation is not None and self.pooling == "pooler"
                and pooler_activation != self.pooler_activation):
            raise ValueError(f"pooler_activation {pooler_activation!r}: {self.modules_file} "
                             f"has the pooler's {self.pooler_activation!r} activation")
        if whitening is not None and self.whitening is not None:
            raise ValueError(f"whitening: {self.modules_file} has its own whitening (a Dense "
                             "module), which the encoder keeps")
        if normalize is not None and bool(normalize) != self.normalize:
            state = "normalises" if self.normalize else "does not normalise"
            raise ValueError(f"normalize={normalize!r}: {self.modules_file} {state} "
                             "(its Normalize module), and an exported folder keeps it")

    def pooling_problem(self, pooling):
        """Why `pooling` is not this folder's (a sentence), or None."""
        from kcse.layers.pooling_rules import resolve_pooling

        if resolve_pooling(pooling) in self.poolings:
            return None
        return (f"{self.modules_file} pools {self.pooling!r}, and an exported folder "
                "keeps its pooling")

    def encoder_arguments(self, backbone, pooling=None):
        """`SentenceEncoder`'s `pooling`, `pooler_activation`, `whitening`
        and `normalize` for this folder, on `backbone` (loaded from
        `transformer`); a pooler Dense's weights are set as its pooler."""
        from kcse.layers.pooling_rules import resolve_pooling
        from kcse.layers.whitening import Whitening

        arguments = {"pooling": resolve_pooling(pooling) if pooling else self.pooling,
                     "pooler_activation": self.pooler_activation, "normalize": self.normalize}
        if self.pooler is not None:
            layer = backbone.get_layer("pooled_dense")
            layer.kernel.assign(self.pooler[0].astype("float32"))
            layer.bias.assign(self.pooler[1].astype("float32"))
        if self.whitening is not None:
            kernel, bias = self.whitening
            whitening = Whitening(n_components=kernel.shape[1] if kernel.shape[1] < kernel.shape[0]
                                  else None)
            whitening.build((None, kernel.shape[0]))
            whitening.kernel.assign(kernel.astype("float32"))
            whitening.mean.assign(whitening_mean(kernel, bias).astype("float32"))
            arguments["whitening"] = whitening
        return arguments


def is_sentence_transformers_folder(path):
    """Whether `path` is a folder with a `modules.json`."""
    return (pathlib.Path(str(path)) / MODULES_FILE).is_file()


def read_prompts_config(folder):
    """A folder's `config_sentence_transformers.json` as a dict (none: `{}`).

    Its `prompts` must be an object of str to str (or null) and its
    `default_prompt_name` null or one of them: a `ValueError` names the
    file and field otherwise.
    """
    path = pathlib.Path(str(folder)) / PROMPTS_FILE
    if not path.is_file():
        return {}
    config = read_json_object(path, "sentence-transformers config")
    prompts = config.get("prompts") or {}
    if not isinstance(prompts, dict) or not all(
            isinstance(text, str) for text in prompts.values()):
        raise ValueError(f"{path}: prompts must be an object of prompt names to texts "
                         f"(strings); got {json.dumps(prompts, ensure_ascii=False)[:80]}")
    name = config.get("default_prompt_name")
    if name is not None and name not in prompts:
        raise ValueError(f"{path}: default_prompt_name {json.dumps(name, ensure_ascii=False)} "
                         f"is not one of its prompts ({', '.join(prompts) or 'none'})")
    return config


def whitening_mean(kernel, bias):
    """μ with `(x − μ) W = x W + b`: `−b W⁺` (the least-norm one), float64."""
    return -np.asarray(bias, "float64") @ np.linalg.pinv(np.asarray(kernel, "float64"))


def read_folder(path):
    """The `FolderModules` of a sentence-transformers folder, or None.

    None for a path that is not a folder with `modules.json` (a Hugging
    Face folder is then checked by `check_huggingface_folder`). Raises a
    `ValueError` naming the file, the module and the field for a module
    kcse cannot express or a damaged file (see the module docstring).
    """
    folder = pathlib.Path(str(path))
    if not folder.is_dir():
        return None
    if not is_sentence_transformers_folder(folder):
        check_huggingface_folder(folder)
        return None
    return FolderReader(folder).read()


class FolderReader:
    """Reads `modules.json` and each module's files, in order."""

    def __init__(self, folder):
        self.folder = folder
        self.modules_file = folder / MODULES_FILE

    def fail(self, module, what):
        raise ValueError(f"{self.modules_file}: module {module.get('idx', '?')} "
                         f"({module.get('type')!r}, path {module.get('path')!r}): {what}")

    def modules(self):
        try:
            modules = json.loads(self.modules_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ValueError(f"{self.modules_file}: not a sentence-transformers module list "
                             f"({' '.join(str(error).split())})") from None
        if not isinstance(modules, list) or not modules or not all(
                isinstance(module, dict) and isinstance(module.get("type"), str)
                and isinstance(module.get("path", ""), str) for module in modules):
            raise ValueError(f"{self.modules_file}: not a sentence-transformers module list "
                             "(a JSON list of objects with a \"type\" and a \"path\")")
        return modules

    def module_folder(self, module):
        folder = self.folder / module.get("path", "")
        if not folder.is_dir() and self.kind(module) != "Normalize":
            self.fail(module, f"no folder {folder}")
        return folder

    @staticmethod
    def kind(module):
        """`Pooling` of `sentence_transformers.models.Pooling` (any of its paths)."""
        if not module["type"].startswith("sentence_transformers."):
            return None
        return module["type"].rsplit(".", 1)[-1]

    def read(self):
        modules = self.modules()
        for module in modules:
            if self.kind(module) not in KNOWN_MODULES:
                self.fail(module, "kcse has no such module (its encoder runs Transformer, "
                          "WeightedLayerPooling, Pooling, Dense and Normalize modules)")
        if self.kind(modules[0]) != "Transformer":
            self.fail(modules[0], "the first module must be a sentence-transformers "
                      "Transformer (the backbone), as kcse's encoder runs one first")
        transformer = self.module_folder(modules[0])
        config = check_huggingface_folder(transformer)
        if config is None:
            self.fail(modules[0], f"no Hugging Face config.json in {transformer}")
        hidden, layers = config.get("hidden_size"), config.get("num_hidden_layers")
        settings = {"transformer": str(transformer),
                    "max_seq_length": self.max_seq_length(transformer, config)}
        rest = list(modules[1:])
        averaged = None
        if rest and self.kind(rest[0]) == "WeightedLayerPooling":
            averaged = self.layer_pooling(rest.pop(0), hidden, layers)
        if not rest or self.kind(rest[0]) != "Pooling":
            self.fail(rest[0] if rest else modules[-1],
                      "kcse's encoder pools the token states next: a Pooling module must "
                      "follow the Transformer (or its WeightedLayerPooling)")
        module = rest.pop(0)
        mode = self.pooling_mode(module, hidden)
        if averaged is not None and mode != "mean":
            self.fail(module, f"pooling mode {mode!r} after a WeightedLayerPooling; kcse "
                      "averages two blocks' tokens (mean) only")
        poolings = averaged or (KCSE_POOLING[mode],)
        settings["pooling"] = poolings[0]
        if rest and self.kind(rest[-1]) == "Normalize":
            settings["normalize"] = True
            rest.pop()
        dense = rest
        for module in dense:
            if self.kind(module) != "Dense":
                known = self.kind(module) in KNOWN_MODULES
                self.fail(module, ("not where kcse's encoder has it" if known else
                                   "kcse has no such module") + " (kcse runs Transformer, "
                          "WeightedLayerPooling, Pooling, a pooler Dense, a whitening Dense and "
                          "Normalize, in this order, the Pooling alone required)")
        if dense and mode == "cls" and self.is_pooler(dense[0], transformer, hidden):
            module = dense.pop(0)
            kernel, bias, activation = self.dense(module, hidden)
            if kernel.shape != (hidden, hidden) or config["model_type"] != "bert":
                self.fail(module, "a Dense after a cls Pooling with tanh is kcse's pooler (P2), "
                          f"which a BERT backbone holds, {hidden} to {hidden}; this one is "
                          f"{kernel.shape[0]} to {kernel.shape[1]} on a {config['model_type']}")
            settings.update(pooling="pooler", pooler=(kernel, bias),
                            pooler_activation="tanh" if activation == TANH else "linear")
            poolings = ("pooler",)
        if dense:
            module = dense.pop(0)
            kernel, bias, activation = self.dense(module, hidden)
            if activation != IDENTITY:
                self.fail(module, f"activation_function {activation!r}: kcse's Dense modules "
                          "are the pooler's (tanh or none, hidden to hidden, after a cls "
                          "Pooling) and the whitening (none)")
            check_whitening_bias(kernel, bias, lambda what: self.fail(module, what))
            settings["whitening"] = (kernel, bias)
        if dense:
            self.fail(dense[0], "a third Dense module: kcse has at most the pooler's and "
                      "the whitening's")
        return FolderModules(modules_file=str(self.modules_file), poolings=poolings, **settings)

    def max_seq_length(self, transformer, config):
        """`sentence_bert_config.json`'s `max_seq_length`, else (sentence-
        transformers 5 keeps it there) `tokenizer_config.json`'s
        `model_max_length` where it fits the positions; or None."""
        limit = config.get("max_position_embeddings")
        if config.get("model_type") == "xlm-roberta" and limit:
            limit -= 2  # XLM-R numbers positions from 2.
        path = transformer / TRANSFORMER_SETTINGS_FILE
        settings = (read_json_object(path, "sentence-transformers Transformer config")
                    if path.is_file() else {})
        if settings.get("do_lower_case"):
            raise ValueError(f"{path}: do_lower_case true: sentence-transformers lowercases "
                             "sentences before the tokenizer, which kcse's encoder does not")
        length = settings.get("max_seq_length")
        if length is None:
            tokenizer = transformer / TOKENIZER_CONFIG_FILE
            length = read_json_object(tokenizer).get("model_max_length") if (
                tokenizer.is_file()) else None
            fits = isinstance(length, int) and 1 <= length <= (limit or length)
            return length if fits else None
        if not (isinstance(length, int) and not isinstance(length, bool) and length >= 1):
            raise ValueError(f"{path}: max_seq_length must be a positive integer; got {length!r}")
        if limit and length > limit:
            raise ValueError(f"{path}: max_seq_length {length} exceeds the model's position "
                             f"embeddings ({limit} tokens, config.json max_position_embeddings)")
        return length

    def config(self, module, folder):
        path = folder / "config.json"
        if not path.is_file():
            self.fail(module, f"no {path}")
        return read_json_object(path, f"{self.kind(module)} config")

    def pooling_mode(self, module, hidden):
        config = self.config(module, self.module_folder(module))
        mode = config.get("pooling_mode")
        if mode is None:
            modes = [name for key, name in LEGACY_POOLING_KEYS.items() if config.get(key)]
            mode = modes or ["mean"]  # sentence-transformers' default.
        modes = [mode] if isinstance(mode, str) else list(mode)
        if len(modes) != 1:
            self.fail(module, f"pooling modes {modes}: kcse pools one way (one of "
                      f"{', '.join(KCSE_POOLING)})")
        if modes[0] not in KCSE_POOLING:
            self.fail(module, f"pooling mode {modes[0]!r} has no kcse pooling (kcse reads "
                      f"{', '.join(KCSE_POOLING)})")
        width = config.get("embedding_dimension", config.get("word_embedding_dimension"))
        if width is not None and width != hidden:
            self.fail(module, f"embedding_dimension {width!r}, where config.json's "
                      f"hidden_size is {hidden}")
        if config.get("include_prompt") is False and modes[0] != "cls" and self.has_prompts():
            self.fail(module, "include_prompt false: sentence-transformers leaves the prompt's "
                      "tokens out of the pooling, which kcse does not")
        return modes[0]

    def has_prompts(self):
        return any((read_prompts_config(self.folder).get("prompts") or {}).values())

    def layer_pooling(self, module, hidden, layers):
        """The kcse poolings a `WeightedLayerPooling` computes (before a mean)."""
        folder = self.module_folder(module)
        config = self.config(module, folder)
        start = config.get("layer_start")
        if config.get("num_hidden_layers") != layers:
            self.fail(module, f"num_hidden_layers {config.get('num_hidden_layers')!r}, where "
                      f"the Transformer's config.json has {layers}")
        weights = self.tensors(module, folder).get("layer_weights")
        if weights is None or not isinstance(start, int) or weights.shape != (layers + 1 - start,):
            self.fail(module, f"layer_start {start!r} and layer_weights of shape "
                      f"{None if weights is None else list(weights.shape)} do not fit "
                      f"{layers} blocks")
        names = tuple(name for name, first in (("first_last_avg", 1), ("last2avg", layers - 1))
                      if first == start)
        if not names or weights[0] <= 0 or weights[0] != weights[-1] or np.any(weights[1:-1]):
            self.fail(module, f"layer weights {weights.tolist()} from layer {start}: kcse "
                      f"averages blocks 1 and {layers} (first_last_avg) or {layers - 1} and "
                      f"{layers} (last2avg) only")
        return names

    def tensors(self, module, folder):
        path = folder / WEIGHTS_FILE
        if not path.is_file():
            self.fail(module, f"no {path} (kcse reads safetensors weights)")
        safetensors_shapes(path)  # A truncated file: one line.
        from safetensors.numpy import load_file

        return {name: value.astype("float64") for name, value in load_file(str(path)).items()}

    def dense(self, module, hidden):
        """`(kernel [in, out], bias, activation)` of a Dense module, checked."""
        folder = self.module_folder(module)
        config = self.config(module, folder)
        activation = config.get("activation_function", TANH)  # Theirs, when none is named.
        if activation not in (IDENTITY, TANH):
            self.fail(module, f"activation_function {activation!r}: kcse's Dense modules are "
                      "the pooler's (tanh or none) and the whitening's (none)")
        for key in ("module_input_name", "module_output_name"):
            if config.get(key, "sentence_embedding") not in ("sentence_embedding", None):
                self.fail(module, f"{key} {config[key]!r}: kcse's Dense modules map the "
                          "sentence embedding")
        inputs, outputs = config.get("in_features"), config.get("out_features")
        tensors = self.tensors(module, folder)
        kernel = tensors.get("linear.weight")
        if kernel is None or kernel.shape != (outputs, inputs):
            self.fail(module, f"linear.weight of shape "
                      f"{None if kernel is None else list(kernel.shape)}, where config.json "
                      f"says in_features {inputs!r}, out_features {outputs!r}")
        if inputs != hidden or outputs > inputs:
            self.fail(module, f"in_features {inputs}, out_features {outputs}: kcse's Dense "
                      f"modules take the {hidden}-dimensional pooled vector to at most as many")
        bias = tensors.get("linear.bias") if config.get("bias", True) else np.zeros(outputs)
        if bias is None or bias.shape != (outputs,):
            self.fail(module, f"linear.bias of shape {None if bias is None else list(bias.shape)}"
                      f", where out_features is {outputs}")
        return kernel.T, bias, activation

    def is_pooler(self, module, transformer, hidden):
        """Whether a Dense after a cls Pooling is the pooler (P2): tanh, or the
        backbone's own pooler weights (kcse's exports write both)."""
        config = self.config(module, self.module_folder(module))
        if config.get("activation_function", TANH) == TANH:
            return True
        kernel, bias, _ = self.dense(module, hidden)
        if kernel.shape != (hidden, hidden):
            return False
        if not (transformer / WEIGHTS_FILE).is_file():
            return False
        names = safetensors_shapes(transformer / WEIGHTS_FILE)
        pooler = [name for name in names if name.endswith("pooler.dense.weight")]
        if not pooler:
            return False
        from safetensors import safe_open

        with safe_open(str(transformer / WEIGHTS_FILE), "np") as weights:
            own = weights.get_tensor(pooler[0]).astype("float64")
            own_bias = weights.get_tensor(pooler[0][:-len("weight")] + "bias").astype("float64")
        return np.array_equal(own.T, kernel) and np.array_equal(own_bias, bias)


def check_whitening_bias(kernel, bias, fail):
    """Calls `fail(what)` unless `bias` is `−μ kernel` for some μ."""
    mean = whitening_mean(kernel, bias)
    residual = np.abs(mean @ kernel + bias).max(initial=0.0)
    if residual > BIAS_TOLERANCE * max(1.0, np.abs(bias).max(initial=0.0)):
        fail(f"its bias is not −mean·kernel for any mean (off by {residual:.3g}): kcse's "
             "whitening computes (x − mean)·kernel")
