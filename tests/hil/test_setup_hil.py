"""bin/setup-hil: what it would install (dry run), and its refusals with real environments here."""

from __future__ import annotations

from hil_helpers import ROOT, clean_env, run

SETUP = ROOT / "bin" / "setup-hil"


def test_dry_run_takes_torch_from_the_cpu_index_and_keeps_numpy_below_2(tmp_path):
    out = run(["bash", SETUP, "--dry-run"], cwd=ROOT, env=clean_env(TTSIM_HIL_VENV=tmp_path / "v"))
    assert out.returncode == 0, out.stderr
    cmds = [ln[2:] for ln in out.stderr.splitlines() if ln.startswith("+ ")]
    torch = [c for c in cmds if "torch==" in c]
    assert len(torch) == 1 and "--index-url https://download.pytorch.org/whl/cpu torch==2.13.0" in torch[0]
    assert any(c.endswith("ttnn==0.81.1 numpy<2") for c in cmds)
    assert any("--no-deps -r" in c for c in cmds) and cmds[-1].endswith(f"-e {ROOT}[test]")
    assert not (tmp_path / "v").exists()  # a dry run changes nothing


def test_reuse_refuses_an_environment_without_ttnn_or_without_cpu_torch(tmp_path, real_python):
    env = clean_env(TTSIM_HIL_VENV=tmp_path / "v")
    no_ttnn = run(["bash", SETUP, "--dry-run", "--reuse", ROOT / ".venv"], cwd=ROOT, env=env)
    assert no_ttnn.returncode == 2 and "cannot import ttnn" in no_ttnn.stderr and "Python 3.11" in no_ttnn.stderr
    no_torch = run(["bash", SETUP, "--dry-run", "--reuse", real_python.parent.parent], cwd=ROOT, env=env)
    assert no_torch.returncode == 2 and "has no CPU torch" in no_torch.stderr, no_torch.stderr
    bad = run(["bash", SETUP, "--frobnicate"], cwd=ROOT, env=env)
    assert bad.returncode == 2 and "unknown argument: --frobnicate" in bad.stderr
