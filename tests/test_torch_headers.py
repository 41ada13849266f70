"""Which of torch's headers a C++ statement is compiled against (opbench.engines.cpp.torch_headers).

The fast tests check the choice and the pruned ATen headers as text; the slow ones compile
statements in the style of PyTorch's own C++ microbenchmarks (benchmarks/instruction_counts:
an nn::Linear forward, a module's forward and backward, a TorchScript module loaded in
global_setup, InferenceMode guards), each with no include or change torch's Timer would
not need.
"""
from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

from opbench.engines.cpp import torch_headers
from opbench.engines.cpp.torch_headers import EXTENSION, FRONTEND, choose, missing_name

torch = pytest.importorskip("torch")
ROOT = torch_headers._include_root()

GENERIC = ("torch::manual_seed(1381023);\nauto x = torch::rand({4, 4});\n"
           "auto y_float = torch::ones({4, 4});\nauto y_int = torch::ones({4, 4}, at::kInt);")


# -- the choice (no compiler) ---------------------------------------------------------------

def test_tensor_code_gets_types_h_and_the_operators_it_names() -> None:
    chosen = choose("auto z = torch::mm(x, y_float).sum(); x.var(0);", GENERIC)
    assert chosen.name == "types" and chosen.pruned
    assert chosen.shared == ("torch/types.h", "c10/util/irange.h")
    # Every name of an operator, however it is called: torch::mm, x.var(...), sum().
    assert {"mm", "ones", "rand", "sum", "var"} <= set(chosen.ops)
    assert "manual_seed" not in chosen.ops  # a function of ATen's context, not an operator
    assert chosen.source_text().endswith("#include <ATen/ops/var.h>\n")
    assert "ATen/ops" not in chosen.shared_text()  # the precompiled part is every statement's
    # torch::kFloat32 is <torch/types.h>'s own; indexing and c10's guards are there too.
    assert choose("auto y = x.to(torch::kFloat32);").name == "types"
    assert choose("x.index_put_({Slice()}, 1);", "using namespace torch::indexing;").name == "types"
    assert choose("auto y = x + 1;", "c10::InferenceMode guard;").name == "types"


@pytest.mark.parametrize("code", [
    ("auto y = model->forward(x);", "auto model = torch::nn::Linear(4, 2);"),
    ("auto z1 = torch::nn::functional::relu(z0);",),
    ("auto y = jit_model.forward(inputs);", "auto jit_model = torch::jit::load(path);",
     "#include <torch/script.h>"),
    ("", "", "#include <torch/torch.h>"),
    ("auto y = x * 2;", "torch::NoGradGuard no_grad;"),
    ("torch::save(x, path);",),
    ("auto l = torch::nn::functional::mse_loss(x, y, torch::kMean);",),
    ("torch::optim::SGD opt(params, 0.1);",),
    ("auto m = nn::Linear(2, 2);", "", "using namespace torch;"),
])
def test_code_that_names_the_rest_of_the_frontend_gets_torch_h(code: tuple[str, ...]) -> None:
    assert choose(*code) is FRONTEND


def test_python_api_gets_the_extension_header() -> None:
    assert choose("py::object o;", "auto x = torch::ones({2});") is EXTENSION
    assert choose("", "", "#include <torch/extension.h>") is EXTENSION
    assert EXTENSION.python_extension and not FRONTEND.python_extension


def test_torch_free_code_gets_none_and_torchs_macros_count_as_torch() -> None:
    assert choose("auto y = x + 1;", "int x = 1;", "#include <vector>") is None
    assert choose('int torchlight = 3; // not torch::', 'auto s = "at::";') is None
    assert choose("int v = TORCH_VERSION_MAJOR;").name == "types"
    assert choose("AT_ASSERT(ok);").name == "types" and choose("AT_MOST(3);") is None
    assert choose("auto y = ones({2});", "", "using namespace torch;").ops == ("ones",)


def test_only_missing_names_widen_the_headers() -> None:
    assert missing_name("stmt:1:12: error: 'Linear' is not a member of 'torch::nn'")
    assert missing_name("stmt:1:9: error: 'TORCH_VERSION_MAJOR' was not declared in this scope")
    assert missing_name("undefined reference to `at::foo()'")
    assert not missing_name("stmt:1:13: error: expected primary-expression before ';' token")


def test_the_overlay_is_torchs_headers_without_their_operator_lists() -> None:
    files = torch_headers.overlay_files(ROOT)
    assert set(files) == {"ATen/Functions.h", "ATen/NativeFunctions.h"}
    for name, text in files.items():
        original = (ROOT / name).read_text().splitlines()
        kept = text.splitlines()
        # Only per-operator includes went; Functions.h's own overloads, and the operators
        # they call, stay.
        assert [ln for ln in original if "#include <ATen/ops/" not in ln] == \
            [ln for ln in kept if "#include <ATen/ops/" not in ln]
        assert len(kept) < len(original) / 3
    functions = files["ATen/Functions.h"]
    assert "inline Tensor var(const Tensor& self, int dim)" in functions
    assert "#include <ATen/ops/var.h>" in functions
    assert "#include <ATen/ops/mm.h>" not in functions


def test_the_overlay_is_written_once_and_mended(tmp_path: Path) -> None:
    folder = torch_headers.overlay(tmp_path)
    assert folder.parent == tmp_path / "pch" and (folder / "ATen" / "Functions.h").is_file()
    assert (tmp_path / "pch").stat().st_mode & 0o777 == 0o700
    assert torch_headers.overlay(tmp_path) == folder
    (folder / "ATen" / "Functions.h").write_text("damaged")
    assert torch_headers.overlay(tmp_path) == folder
    assert (folder / "ATen" / "Functions.h").read_text() == \
        torch_headers.overlay_files(ROOT)["ATen/Functions.h"]


def test_code_that_needed_the_frontend_is_remembered(tmp_path: Path) -> None:
    code = ("int v = TORCH_VERSION_MAJOR;", "", "")
    assert not torch_headers.needed_frontend(tmp_path, code)
    torch_headers.remember_frontend(tmp_path, code)
    assert torch_headers.needed_frontend(tmp_path, code)
    assert not torch_headers.needed_frontend(tmp_path, ("int v = 1;", "", ""))


def test_the_flags_read_from_torchs_files_are_torchs_own() -> None:
    from opbench.engines.cpp import build

    for python_extension in (False, True):
        assert torch_headers.flags_unimported(python_extension) == build.torch_flags(python_extension)


# -- PyTorch's C++ microbenchmarks, compiled (slow) ------------------------------------------

needs_cxx = pytest.mark.skipif(not (shutil.which("g++") or shutil.which("c++")),
                               reason="no C++ compiler on PATH")


@pytest.fixture
def cpp_timer(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    from cpp_cache import torch_cache_dir
    from opbench.timer import Timer

    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(torch_cache_dir(tmp_path_factory)))

    def measure(stmt: str, setup: str = "", global_setup: str = ""):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a busy machine's warnings are not the point
            timer = Timer(stmt, setup, global_setup=global_setup, language="c++")
            return timer.blocked_autorange(min_run_time=0.05)

    return measure


@needs_cxx
@pytest.mark.slow
def test_tensor_statements_compile_against_the_pruned_header(cpp_timer) -> None:
    # benchmarks/instruction_counts' "add", "var" and "MatMul" items, as written there.
    for stmt in ("x += 1.0;", "x.var(0);", "auto z = torch::mm(x, y_float);"):
        assert cpp_timer(stmt, GENERIC).median > 0


@needs_cxx
@pytest.mark.slow
def test_an_nn_linear_forward(cpp_timer) -> None:
    m = cpp_timer("auto y = model->forward(x);",
                  "auto x = torch::ones({4, 4, 4, 4});\nauto model = torch::nn::Linear(4, 2);")
    assert m.median > 0


@needs_cxx
@pytest.mark.slow
def test_a_small_modules_forward_and_backward(cpp_timer) -> None:
    net = """
        struct Net : torch::nn::Module {
          Net() : fc1(register_module("fc1", torch::nn::Linear(8, 16))),
                  fc2(register_module("fc2", torch::nn::Linear(16, 1))) {}
          torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x))); }
          torch::nn::Linear fc1, fc2;
        };
    """
    m = cpp_timer("auto y = net.forward(x).sum();\ny.backward();\nnet.zero_grad();",
                  "Net net;\nauto x = torch::ones({4, 8});", net)
    assert m.median > 0


@needs_cxx
@pytest.mark.slow
def test_a_torchscript_module_loaded_in_global_setup(cpp_timer, tmp_path: Path) -> None:
    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.fc(x))

    path = tmp_path / "model.pt"
    torch.jit.script(Model()).save(str(path))
    global_setup = f'#include <torch/script.h>\nstatic auto jit_model = torch::jit::load("{path}");'
    m = cpp_timer(
        "std::vector<torch::jit::IValue> inputs({torch::jit::IValue(x)});\n"
        "auto y = jit_model.forward(inputs).toTensor();\n"
        'if (y.sizes() != c10::IntArrayRef({3, 2})) throw std::runtime_error("wrong shape");',
        "auto x = torch::ones({3, 4});", global_setup)
    assert m.median > 0


@needs_cxx
@pytest.mark.slow
def test_inference_mode_guards_hold_in_the_loop(cpp_timer) -> None:
    check = ('if (!c10::InferenceMode::is_enabled() || !y.is_inference()) '
             'throw std::runtime_error("not in inference mode");')
    assert cpp_timer(f"auto y = x * 2;\n{check}",
                     "c10::InferenceMode guard;\nauto x = torch::ones({4});").median > 0
    # A guard in the statement itself, as the frontend's own tests write it.
    assert cpp_timer("{ c10::InferenceMode guard; auto y = x * 2; opbench::do_not_optimize(y); }",
                     "auto x = torch::ones({4});").median > 0


@needs_cxx
@pytest.mark.slow
def test_a_name_types_h_lacks_is_found_in_the_frontend(cpp_timer, tmp_path_factory) -> None:
    from cpp_cache import torch_cache_dir

    code = ("int v = TORCH_VERSION_MAJOR; opbench::do_not_optimize(v);", "", "")
    assert choose(*code).name == "types"  # nothing says it needs more ...
    assert cpp_timer(*code).median > 0  # ... but torch/version.h is the frontend's
    assert torch_headers.needed_frontend(torch_cache_dir(tmp_path_factory), code)
