"""The GitHub Actions workflows, read as YAML: triggers, the CI gate before deploy, per-job permissions, actions
pinned by commit SHA, no JSON key, the Cloud Run settings; and their shell steps run under bash with the inputs a
repository could give them (unset variables in a fork, a key pinned to `latest`, a shared database)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
FLOWS = ROOT / ".github" / "workflows"
# The versions the deploy issue verified; a new version is a deliberate change here too.
VERIFIED = {
    "actions/checkout": ("3d3c42e5aac5ba805825da76410c181273ba90b1", "v7.0.1"),
    "actions/setup-python": ("5fda3b95a4ea91299a34e894583c3862153e4b97", "v7.0.0"),
    "actions/upload-artifact": ("bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "v7.0.0"),
    "google-github-actions/auth": ("7c6bc770dae815cd3e89ee6cdf493a5fab2cc093", "v3.0.0"),
    "google-github-actions/setup-gcloud": ("aa5489c8933f4cc7a4f7d45035b3b1440c9c10db", "v3.0.1"),
    "google-github-actions/deploy-cloudrun": ("2028e2d7d30a78c6910e0632e48dd561b064884d", "v3.0.1"),
}
REQUIRED_VARS = {
    "GCP_PROJECT": "verbatim-prod", "GCP_REGION": "europe-west1", "GCP_ARTIFACT_REPO": "verbatim",
    "CLOUD_RUN_SERVICE": "verbatim", "GCP_WIF_PROVIDER": "projects/1/locations/global/workloadIdentityPools/github/"
    "providers/verbatim", "GCP_DEPLOYER_SA": "deployer@p.iam.gserviceaccount.com",
    "GCP_RUNTIME_SA": "runtime@p.iam.gserviceaccount.com", "SECRET_ACCESS_CODE": "verbatim-access-code"}


def load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((FLOWS / name).read_text(encoding="utf-8"))
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as true
    return data


def steps(flow: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for job in flow["jobs"].values() for s in job.get("steps", [])]


def step(flow: dict[str, Any], job: str, name: str) -> dict[str, Any]:
    return next(s for s in flow["jobs"][job]["steps"] if s.get("name") == name)


ALL = ["ci.yml", "deploy.yml", "benchmark.yml"]


# -- hygiene, every workflow ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL)
def test_every_action_is_pinned_to_a_verified_commit_with_its_version(name: str) -> None:
    text = (FLOWS / name).read_text(encoding="utf-8")
    uses = re.findall(r"^\s*(?:-\s*)?uses:\s*(\S+)(.*)$", text, flags=re.M)
    assert uses
    for ref, rest in uses:
        if ref.startswith("./"):  # this repository's own reusable workflow
            continue
        action, _, sha = ref.partition("@")
        assert re.fullmatch(r"[0-9a-f]{40}", sha), f"{ref} is not pinned to a commit"
        assert action in VERIFIED and VERIFIED[action][0] == sha, f"{ref} is not a verified commit"
        assert f"# {VERIFIED[action][1]}" in rest, f"{ref} lacks its version comment"


@pytest.mark.parametrize("name", ALL)
def test_permissions_are_granted_per_job_and_id_tokens_only_where_auth_runs(name: str) -> None:
    flow = load(name)
    assert flow["permissions"] == {}
    for job_id, job in flow["jobs"].items():
        assert "permissions" in job, f"{name}: job {job_id} sets no permissions"
        perms = job["permissions"]
        if perms.get("id-token") == "write":
            auth = any(str(s.get("uses", "")).startswith("google-github-actions/auth@") for s in job.get("steps", []))
            calls_deploy = job.get("uses") == "./.github/workflows/deploy.yml"
            assert auth or calls_deploy, f"{name}: job {job_id} has id-token: write without authenticating"
        assert perms.get("contents", "read") in ("read", "write") and "write-all" not in str(perms)


@pytest.mark.parametrize("name", ALL)
def test_no_key_file_no_echoed_secret_and_no_expression_inside_scripts(name: str) -> None:
    text = (FLOWS / name).read_text(encoding="utf-8")
    for banned in ("credentials_json", "GOOGLE_APPLICATION_CREDENTIALS", "PRIVATE KEY", "service_account_key",
                   "secrets: inherit", "pull_request_target", "workflow_run"):
        assert banned not in text, f"{name} mentions {banned}"
    flow = load(name)
    for s in steps(flow):
        if "run" in s:
            assert "${{" not in s["run"], f"{name}: an expression inside the script of {s.get('name')!r}"
            assert not re.search(r"echo[^\n]*\$\{?[A-Z_]*(KEY|TOKEN|SECRET)\b", s["run"].replace("::add-mask::", ""))
        if str(s.get("uses", "")).startswith("actions/checkout@"):
            assert s["with"]["persist-credentials"] is False


def test_ci_runs_the_readme_test_command_on_push_and_pull_request_and_gates_the_deploy() -> None:
    ci = load("ci.yml")
    assert set(ci["on"]) == {"push", "pull_request"}
    test = ci["jobs"]["test"]
    assert test["permissions"] == {"contents": "read"} and test["container"]["image"].startswith("python:3.11")
    assert step(ci, "test", "Install from the lock files and run the README's test command")["run"] == ".ci/run"
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in (ROOT / "README.md").read_text(encoding="utf-8")
    deploy = ci["jobs"]["deploy"]
    assert deploy["needs"] == "test" and deploy["uses"] == "./.github/workflows/deploy.yml"
    assert deploy["if"] == "github.event_name == 'push' && github.ref == 'refs/heads/main'"
    # Pull requests cancel their older runs; main never does (its runs deploy).
    assert ci["concurrency"]["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}"


# -- deploy -----------------------------------------------------------------------------------------------------------

def test_deploy_is_called_only_after_ci_and_never_cancelled_half_way() -> None:
    flow = load("deploy.yml")
    assert flow["on"] == {"workflow_call": None}  # no trigger of its own: ci.yml calls it once the tests pass
    job = flow["jobs"]["deploy"]
    assert job["needs"] == "settings" and job["if"] == "needs.settings.outputs.ready == 'true'"
    assert job["environment"] == "production"  # the deployer account trusts only this environment's token subject
    assert job["concurrency"]["cancel-in-progress"] is False
    assert job["permissions"] == {"contents": "read", "id-token": "write"}
    assert flow["jobs"]["settings"]["permissions"] == {}
    auth = step(flow, "deploy", "Authenticate to Google Cloud (Workload Identity Federation)")["with"]
    assert set(auth) == {"project_id", "workload_identity_provider", "service_account"}
    assert auth["workload_identity_provider"] == "${{ vars.GCP_WIF_PROVIDER }}"
    assert job["env"]["IMAGE"].endswith(":${{ github.sha }}") and "docker.pkg.dev/" in job["env"]["IMAGE"]
    build = step(flow, "deploy", "Build the image and push it to Artifact Registry")["run"]
    assert 'docker build --pull --build-arg "GIT_COMMIT=$GITHUB_SHA" --tag "$IMAGE" .' in build
    assert 'docker push "$IMAGE"' in build


def test_cloud_run_settings_each_with_its_reason() -> None:
    flow = load("deploy.yml")
    deploy = step(flow, "deploy", "Deploy to Cloud Run")
    flags = str(deploy["with"]["flags"])
    for flag in ("--no-invoker-iam-check", "--no-cpu-throttling", "--session-affinity", "--timeout=3600",
                 "--memory=1Gi", "--cpu=1", "--max-instances=${{ needs.settings.outputs.max_instances }}",
                 "--service-account=${{ vars.GCP_RUNTIME_SA }}"):
        assert re.search(rf"(^|\s){re.escape(flag)}(\s|$)", flags), flag
    text = (FLOWS / "deploy.yml").read_text(encoding="utf-8")
    for flag in ("--no-invoker-iam-check", "--no-cpu-throttling", "--session-affinity", "--timeout=3600",
                 "--memory=1Gi --cpu=1", "--max-instances", "--service-account"):
        assert re.search(rf"# {re.escape(flag)}[^\n]*: \S", text), f"no reason given for {flag}"
    assert deploy["with"]["secrets"] == "${{ needs.settings.outputs.secrets }}"
    assert "ACCESS_CODE_FILE=/secrets/access-code/code" in deploy["with"]["env_vars"]


def run_script(script: str, env: dict[str, str], tmp_path: Path) -> tuple[int, dict[str, str], str]:
    """Run a workflow step's script as the runner does (bash -e -o pipefail); its exit code, outputs and log."""
    out = tmp_path / "output"
    out.write_text("", encoding="utf-8")
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], capture_output=True,
                          text=True, timeout=30, env={"PATH": "/usr/bin:/bin", "GITHUB_OUTPUT": str(out), **env})
    outputs: dict[str, str] = {}
    lines = iter(out.read_text(encoding="utf-8").splitlines())
    for line in lines:
        if "<<" in line:
            key, _, end = line.partition("<<")
            body = []
            for more in lines:
                if more == end:
                    break
                body.append(more)
            outputs[key] = "\n".join(body)
        else:
            key, _, value = line.partition("=")
            outputs[key] = value
    return proc.returncode, outputs, proc.stdout + proc.stderr


def settings_script() -> str:
    return str(step(load("deploy.yml"), "settings", "Check the repository variables")["run"])


def test_a_fork_without_the_variables_skips_the_deploy_with_a_notice(tmp_path: Path) -> None:
    code, outputs, log = run_script(settings_script(), {"GCP_PROJECT": "p"}, tmp_path)
    assert code == 0 and outputs == {"ready": "false"}
    assert "::notice title=Deploy skipped::" in log and "GCP_REGION" in log and "GCP_PROJECT" not in log.split("::")[-1]


def test_settings_mount_the_code_pin_the_keys_and_keep_one_instance_on_sqlite(tmp_path: Path) -> None:
    env = {**REQUIRED_VARS, "SECRET_ANTHROPIC_API_KEY": "anthropic-api-key:3", "SECRET_BRAVE_API_KEY": "brave:12",
           "CLOUD_RUN_MAX_INSTANCES": "4"}
    code, outputs, log = run_script(settings_script(), env, tmp_path)
    assert code == 0 and outputs["ready"] == "true" and outputs["max_instances"] == "1"
    assert outputs["secrets"].splitlines() == ["/secrets/access-code/code=verbatim-access-code:latest",
                                               "ANTHROPIC_API_KEY=anthropic-api-key:3", "BRAVE_API_KEY=brave:12"]
    assert "title=One instance" in log


def test_a_shared_database_allows_more_instances(tmp_path: Path) -> None:
    env = {**REQUIRED_VARS, "SECRET_RESEARCH_DB": "research-db-url:1", "CLOUD_SQL_INSTANCE": "proj:europe-west1:db"}
    code, outputs, _ = run_script(settings_script(), env, tmp_path)
    assert code == 0 and outputs["max_instances"] == "3" and "RESEARCH_DB=research-db-url:1" in outputs["secrets"]
    assert outputs["cloudsql"] == "--add-cloudsql-instances=proj:europe-west1:db"
    code, outputs, _ = run_script(settings_script(), {**env, "CLOUD_RUN_MAX_INSTANCES": "6"}, tmp_path)
    assert code == 0 and outputs["max_instances"] == "6"


@pytest.mark.parametrize("var,value,message", [
    ("SECRET_ANTHROPIC_API_KEY", "anthropic-api-key:latest", "with a version number (not latest)"),
    ("SECRET_TAVILY_API_KEY", "tavily", "SECRET_NAME:VERSION"),
    ("SECRET_ACCESS_CODE", "code; rm -rf /", "must be a secret name"),
    ("CLOUD_RUN_MAX_INSTANCES", "many", "from 1 to 99"),
    ("CLOUD_SQL_INSTANCE", "proj:db --allow-unauthenticated", "PROJECT:REGION:INSTANCE")])
def test_bad_settings_stop_the_deploy_with_an_error(tmp_path: Path, var: str, value: str, message: str) -> None:
    env = {**REQUIRED_VARS, "SECRET_RESEARCH_DB": "db:1", var: value}
    code, outputs, log = run_script(settings_script(), env, tmp_path)
    assert code == 1 and "ready" not in outputs and "::error::" in log and message in log


# -- benchmark --------------------------------------------------------------------------------------------------------

def test_benchmark_is_manual_uploads_its_results_and_proposes_them_for_review() -> None:
    flow = load("benchmark.yml")
    assert set(flow["on"]) == {"workflow_dispatch"}
    assert set(flow["on"]["workflow_dispatch"]["inputs"]) == {"suite", "modes", "repeat", "max_usd"}
    bench, pr = flow["jobs"]["bench"], flow["jobs"]["pull-request"]
    assert bench["permissions"] == {"contents": "read", "id-token": "write"}
    assert pr["needs"] == "bench" and pr["permissions"] == {"actions": "read", "contents": "write",
                                                            "pull-requests": "write"}
    assert "python -m pipeline bench" in step(flow, "bench", "Run the suite")["run"]
    assert step(flow, "bench", "Keep the results")["uses"].startswith("actions/upload-artifact@")
    script = step(flow, "pull-request", "Open a pull request adding the runs to benchmark_runs/")["run"]
    assert "gh run download" in script and "gh pr create" in script and "git push" in script


@pytest.mark.parametrize("inputs,ok", [
    ({"SUITE": "news", "MODES": "fixed,tools", "REPEAT": "3", "MAX_USD": "5"}, True),
    ({"SUITE": "failure-set", "MODES": "extractive", "REPEAT": "1", "MAX_USD": "2.50"}, True),
    ({"SUITE": "news", "MODES": "fixed;curl evil", "REPEAT": "1", "MAX_USD": "5"}, False),
    ({"SUITE": "news", "MODES": "fixed", "REPEAT": "10", "MAX_USD": "5"}, False),
    ({"SUITE": "news", "MODES": "fixed", "REPEAT": "1", "MAX_USD": "1e9"}, False),
    ({"SUITE": "../etc", "MODES": "fixed", "REPEAT": "1", "MAX_USD": "5"}, False)])
def test_benchmark_inputs_are_checked_before_anything_runs(tmp_path: Path, inputs: dict[str, str], ok: bool) -> None:
    script = step(load("benchmark.yml"), "bench", "Check the inputs")["run"]
    code, _, log = run_script(script, inputs, tmp_path)
    assert (code == 0) is ok, log


@pytest.mark.parametrize("name", ALL)
def test_every_script_is_valid_bash(name: str) -> None:
    for s in steps(load(name)):
        if "run" in s:
            proc = subprocess.run(["bash", "-n"], input=s["run"], capture_output=True, text=True, timeout=10)
            assert proc.returncode == 0, f"{name} {s.get('name')!r}: {proc.stderr}"
