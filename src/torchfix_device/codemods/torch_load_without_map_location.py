import ast
from typing import Iterator
import libcst as cst
from torchfix_device.syntax import nodes
from torchfix_device.syntax.nodes import HOST_METHODS
from torchfix_device.codemods.base import Codemod
from torchfix_device.prefilter.candidates import FileFacts, calls_to, has_keyword
from torchfix_device.devices.source import DeviceExpr, NoDevice
from torchfix_device.facts import cpu_paths, kinds
from torchfix_device.facts import values as facts_values
from torchfix_device.facts.project_attributes import stays_on_cpu

TORCH_LOAD = {"torch.load", "torch.serialization.load"}
LOAD = frozenset({"load"})


class TorchLoadWithoutMapLocation(Codemod):
    """
    ## What it does
    Adds `map_location=<device>` to `torch.load(...)` calls that do not pass one, however
    `torch.load` was imported (`import torch as T`, `from torch import load as L`).

    The device is the one the surrounding code runs on: inside an `nn.Module` method, the
    module's own device (`x.device`, `self.weight.device`); in a function with a `device`
    argument, that argument; where the user's own flag decides the device (`args.cuda`,
    `use_gpu`, see TFD001), `device = torch.device("cuda" if args.cuda else "cpu")` placed where
    the flag is final, so `--no-cuda` loads onto the CPU (where a flag decides, only a device
    built from that flag is taken, never one from `torch.cuda.is_available()` alone); elsewhere
    an existing `device = torch.device(...)` binding, or
    `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")` inserted once after
    the imports. That device is what the loaded tensors are about to be used with, and it exists
    on the machine that runs the code — unlike the device recorded in the checkpoint.

    Where no such device can be chosen (in `__init__`, in a module without parameters of its
    own, where a flag cannot give it) but the load is read only by `m.load_state_dict(...)`,
    `map_location="cpu"`: a module's or optimizer's `load_state_dict` copies each tensor to
    where its own are, so any location that exists does.

    Where no file of the load's import group (the files of the run connected to its file by
    imports, either way; more than the file itself) puts a value on a device, nor any file of
    the run in its folder or below (where a pickled model's class may come from),
    `map_location="cpu"` instead of that default: every value the loaded one meets is on the CPU (a CPU-only `predict.py` that
    `server.py` imports), so the checkpoint is put there too, whatever device it was saved from
    (a configured `device-expression` is used as it is).

    ## Why is this bad?
    `torch.load` puts every tensor back on the device it was saved from. A checkpoint written on
    a GPU fails to load on a CPU-only machine (`RuntimeError: Attempting to deserialize object on
    a CUDA device but torch.cuda.is_available() is False`), and one written on `cuda:1` lands on
    `cuda:1` even when the model runs on `cuda:0`, giving `Expected all tensors to be on the same
    device`.

    ## Example
    ```python
    state = torch.load("ckpt.pt")
    ```

    ## Use instead
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    state = torch.load("ckpt.pt", map_location=device)
    ```

    ## Not rewritten
    A load whose tensors are only read out to the host, `{k: v.numpy() for k, v in
    torch.load(f).items()}` (`.values()`, `.tolist()`, any comprehension): the code reads CPU
    tensors only, as a checkpoint saved on the CPU gives them (one saved on a GPU failed at
    `.numpy()` in 0.3 as well), and a device of the code would make those reads raise.
    Calls that already pass `map_location` (by keyword or as the second positional argument) or
    forward `*args` or `**kwargs` (which may hold it: `def load(*a, **k): return torch.load(*a, **k)`); every other `load` (`np.load`, `pickle.load`,
    `json.load`, `yaml.load`, a method called `load`); calls inside `__init__` or nested
    functions of an `nn.Module`, where no module device exists (a static or class method takes
    the device as a function does), and calls where a
    user's flag decides the device but cannot give it (the load runs before the flag is final,
    or the flag changes later, or guards test different flags; or every move of the file lies in
    the body of an `if` on a flag the load does not see, as `if cuda: x = x.cuda()` in a
    function given `cuda` by `**vars(args)`): those are reported, rather than
    sent to the GPU on `torch.cuda.is_available()` alone against `--no-cuda` (unless read only
    by `load_state_dict`, above; never with `assign=True`, which keeps the loaded tensors).

    ## Fix safety
    Safe. The loaded values are the same; only where they live changes, and they are placed
    where the code that uses them runs. In a module given its submodules or subclassed by others (see TFD001),
    `map_location=next(self.parameters()).device` is unsafe. `map_location="cpu"` for `m.load_state_dict(...)` is
    safe where `m` is shown to be a `torch.nn` module or `torch.optim` optimizer (made by one,
    or by an `nn.Module` class of the file, or the method's own `self`, where no class of the
    file defines `load_state_dict`); else unsafe: a `load_state_dict` of the project's own may
    keep the tensors where they load.
    """

    code = "TFD005"
    skips_within_statements = True
    name = "torch-load-without-map-location"
    summary = "`torch.load` without `map_location` fails on machines without the saving device"
    safe = True
    triggers = ("load",)

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        return torch_load_possible(facts) and next(cls.sites(facts), None) is not None

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        """Calls that may be ``torch.load`` without ``map_location=``."""
        return calls_to(facts, TORCH_LOAD, _load_without_map_location)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not (self.qualified_names(original_node.func, ending_in=LOAD) & TORCH_LOAD):
            return updated_node
        if nodes.keyword_arg(original_node, "map_location") is not None:
            return updated_node
        if len(nodes.positional_args(original_node)) >= 2 or nodes.has_star_args(original_node):
            return updated_node  # a location chosen positionally, or forwarded `*args`/`**kwargs`
        if self._read_on_host(original_node):
            return updated_node  # the code reads CPU tensors only: a device would make `.numpy()` raise
        if self.class_stack and kinds.is_dataset_class(facts_values.of(self), self.class_stack[-1]):
            if self.report(original_node, "`torch.load` without `map_location` in a data set: add `map_location=\"cpu\"`, where a `DataLoader` and its workers expect its data"):
                return nodes.add_keyword_arg(updated_node, "map_location", '"cpu"')
            return updated_node
        device = self.device_source.for_site(original_node, chooses_location=True, unproven=True)
        if self.device_expression is None and stays_on_cpu(facts_values.of(self)) and self._default_or_none(device):
            if self.report(original_node, "`torch.load` without `map_location`: add `map_location=\"cpu\"`: no file of its "
                           "import group or of its folder puts a value on a device"):
                return nodes.add_keyword_arg(updated_node, "map_location", '"cpu"')
            return updated_node
        flag = cpu_paths.flag_of_every_move(facts_values.of(self)) if self._default_or_none(device) else None
        if flag is not None and isinstance(device, DeviceExpr):
            device = NoDevice(f"every move of the file is under `if {flag}:`, which this load does not follow: "
                              "`torch.cuda.is_available()` alone would load onto the GPU against the flag; choose one by hand")
        if isinstance(device, DeviceExpr) and device.unproven is not None:
            if self._state_receiver(original_node) is None:  # else "cpu", which needs no parameter (below)
                if self.report(original_node, f"`torch.load` without `map_location`: add `map_location={device.code}`; unsafe: {device.unproven}", safe=False):
                    return nodes.add_keyword_arg(updated_node, "map_location", device.code)
                return updated_node
            device = NoDevice(device.unproven)
        if isinstance(device, NoDevice):
            receiver = self._state_receiver(original_node)
            if receiver is None:
                self.report(original_node, f"`torch.load` without `map_location`: {device.reason}", fixable=False)
                return updated_node
            message = (f"`torch.load` without `map_location`, read only by `{nodes.code_of(receiver)}.load_state_dict`, which "
                       "copies each tensor to where its own are: add `map_location=\"cpu\"`")
            if kinds.copies_state_in(facts_values.of(self), receiver):
                fixed = self.report(original_node, message)
            else:
                fixed = self.report(original_node, f"{message} (unsafe: `{nodes.code_of(receiver)}` is not shown to be a torch "
                                    "module or optimizer, and a `load_state_dict` of its own may keep the tensors where they load)",
                                    safe=False)
            return nodes.add_keyword_arg(updated_node, "map_location", '"cpu"') if fixed else updated_node
        if self.report(original_node, f"`torch.load` without `map_location`: add `map_location={device.code}`"):
            return nodes.add_keyword_arg(updated_node, "map_location", device.code)
        return updated_node


    def _default_or_none(self, device: DeviceExpr | NoDevice) -> bool:
        """No device, or only the file's default one (``torch.cuda.is_available()``), not a
        module's, a parameter's or a flag's."""
        return not isinstance(device, DeviceExpr) or device.unproven is not None or device.code == self.device_source.inserted_name

    def _read_on_host(self, load: cst.Call) -> bool:
        """The loaded tensors are only read out to the host: ``{k: v.numpy() for k, v in
        torch.load(f).items()}`` (or ``.values()``; a comprehension of one ``for``), each value
        read only as ``v.numpy()`` or ``v.tolist()``."""
        attr = self.parent_of(load)
        call = self.parent_of(attr) if isinstance(attr, cst.Attribute) and attr.value is load else None
        loop = self.parent_of(call) if isinstance(call, cst.Call) and call.func is attr and not call.args else None
        if not (isinstance(loop, cst.CompFor) and loop.iter is call and loop.inner_for_in is None):
            return False
        target: cst.BaseExpression | None = loop.target
        method = cst.ensure_type(attr, cst.Attribute).attr.value
        if method == "items":
            pair = target.elements if isinstance(target, (cst.Tuple, cst.List)) else ()
            target = pair[1].value if len(pair) == 2 and isinstance(pair[1], cst.Element) else None
        elif method != "values":
            return False
        if not isinstance(target, cst.Name):
            return False
        reads = facts_values.of(self).reads_of(target)
        return bool(reads) and all(self._host_read(read) for read in reads)

    def _host_read(self, name: cst.Name) -> bool:
        """``name.numpy()`` or ``name.tolist()``."""
        attr = self.parent_of(name)
        call = self.parent_of(attr) if isinstance(attr, cst.Attribute) and attr.value is name and attr.attr.value in HOST_METHODS else None
        return isinstance(call, cst.Call) and call.func is attr and not call.args

    def _state_receiver(self, load: cst.Call) -> cst.BaseExpression | None:
        """``m`` where the loaded value is only given to ``m.load_state_dict(...)``, whole (without
        ``assign=``); None otherwise."""
        arg = self.parent_of(load)
        call = self.parent_of(arg) if isinstance(arg, cst.Arg) else None
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "load_state_dict"):
            return None
        if arg.keyword is not None and arg.keyword.value != "state_dict" or arg is not call.args[0] \
                or nodes.keyword_arg(call, "assign") is not None or nodes.has_star_args(call):
            return None
        return call.func.value


# -- stage 1 ---------------------------------------------------------------------------------
def torch_load_possible(f: FileFacts) -> bool:
    return f.torch_imported and "load" in f.names


def _load_without_map_location(call: ast.Call) -> bool:
    """The codemod's own test: no ``map_location=``, fewer than two positional arguments, no ``*``/``**``."""
    return (
        not has_keyword(call, "map_location") and len(call.args) < 2
        and not any(isinstance(a, ast.Starred) for a in call.args) and all(k.arg is not None for k in call.keywords)
    )
