"""The gcloud commands the docs print use only flags gcloud has, in combinations gcloud accepts.

Every `gcloud …` line in README.md, docs/DATAFLOW.md and templates/flex/ (continuations joined) is
split like a shell would and its flags checked against the command's flags, copied from gcloud's
reference pages (the SYNOPSIS of each, URL beside it) plus gcloud's global flags. Files the commands
name (the build config, the ignore file, the metadata file) must exist, and the template parameters
a run passes must be template parameters or Beam options.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from ddb2bt.app.options import beam_knows

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "README.md", ROOT / "docs" / "DATAFLOW.md", ROOT / "templates" / "flex" / "README.md",
           ROOT / "templates" / "flex" / "Dockerfile", ROOT / "templates" / "flex" / "cloudbuild.yaml"]

GLOBAL = {"--access-token-file", "--account", "--billing-project", "--configuration", "--flags-file", "--flatten",
          "--format", "--help", "--impersonate-service-account", "--log-http", "--project", "--quiet", "-q",
          "--trace-token", "--user-output-enabled", "--verbosity"}
"""https://cloud.google.com/sdk/gcloud/reference (GCLOUD WIDE FLAGS)"""

FLAGS = {
    # https://cloud.google.com/sdk/gcloud/reference/builds/submit
    ("builds", "submit"): {
        "--no-source", "--async", "--no-cache", "--default-buckets-behavior", "--dir", "--disk-size", "--gcs-log-dir",
        "--gcs-source-staging-dir", "--git-source-dir", "--git-source-revision", "--ignore-file", "--machine-type",
        "--polling-interval", "--region", "--revision", "--service-account", "--substitutions", "--suppress-logs",
        "--timeout", "--worker-pool", "--config", "--pack", "--tag", "-t"},
    # https://cloud.google.com/sdk/gcloud/reference/dataflow/flex-template/build
    ("dataflow", "flex-template", "build"): {
        "--sdk-language", "--image", "--env", "--flex-template-base-image", "--image-gcr-path", "--go-binary-path",
        "--jar", "--py-path", "--yaml-pipeline-path", "--yaml-image", "--additional-experiments",
        "--additional-user-labels", "--cloud-build-service-account", "--dataflow-kms-key", "--disable-public-ips",
        "--enable-streaming-engine", "--gcs-log-dir", "--image-repository-cert-path",
        "--image-repository-password-secret-id", "--image-repository-username-secret-id", "--max-workers",
        "--metadata-file", "--network", "--num-workers", "--print-only", "--service-account-email",
        "--staging-location", "--subnetwork", "--temp-location", "--worker-machine-type", "--worker-region",
        "--worker-zone"},
    # https://cloud.google.com/sdk/gcloud/reference/dataflow/flex-template/run
    ("dataflow", "flex-template", "run"): {
        "--template-file-gcs-location", "--additional-experiments", "--additional-pipeline-options",
        "--additional-user-labels", "--dataflow-kms-key", "--disable-public-ips", "--enable-streaming-engine",
        "--flexrs-goal", "--launcher-machine-type", "--max-workers", "--network", "--num-workers", "--parameters",
        "--region", "--service-account-email", "--staging-location", "--subnetwork", "--temp-location",
        "--worker-machine-type", "--update", "--transform-name-mappings", "--worker-region", "--worker-zone"},
}
EXCLUSIVE = {("builds", "submit"): [{"--config", "--pack", "--tag", "-t"}],
             ("dataflow", "flex-template", "build"): [{"--image", "--env"}, {"--worker-region", "--worker-zone"}],
             ("dataflow", "flex-template", "run"): [{"--worker-region", "--worker-zone"}]}
"""Flags gcloud's SYNOPSIS puts in one group of alternatives: at most one of each set."""


def documented_commands() -> list[tuple[str, list[str]]]:
    """(where, words) of every gcloud command in the sources, with `\\` continuations and comment markers joined."""
    found = []
    for source in SOURCES:
        lines = [re.sub(r"^\s*#\s?", "", line) if source.suffix in ("", ".yaml") or source.name == "Dockerfile"
                 else line for line in source.read_text().splitlines()]
        i = 0
        while i < len(lines):
            line = lines[i].strip()
            if line.startswith("gcloud ") and not line.startswith("gcloud topic"):
                command = line
                while command.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command = command[:-1] + " " + lines[i].strip()
                command = command.split(" #")[0]
                command = re.sub(r"\$\(date[^)]*\)", "DATE", command).rstrip("`").split("`")[0]
                found.append((f"{source.relative_to(ROOT)}:{i + 1}", shlex.split(command)))
            i += 1
    return found


COMMANDS = documented_commands()


def command_path(words: list[str]) -> tuple[str, ...]:
    for path in FLAGS:
        if tuple(words[1:1 + len(path)]) == path:
            return path
    return tuple(words[1:3])


def flags_of(words: list[str]) -> list[tuple[str, str | None]]:
    """(flag, value) pairs: `--a=b`, `--a b`, or `--switch` followed by another flag or nothing."""
    pairs, i = [], 0
    while i < len(words):
        word = words[i]
        if word.startswith("-"):
            if "=" in word:
                pairs.append(tuple(word.split("=", 1)))
            elif i + 1 < len(words) and not words[i + 1].startswith("-"):
                pairs.append((word, words[i + 1]))
                i += 1
            else:
                pairs.append((word, None))
        i += 1
    return pairs


def test_the_docs_show_the_three_commands():
    shown = {command_path(words) for _, words in COMMANDS}
    assert set(FLAGS) <= shown, shown
    assert any(where.startswith("README.md") for where, _ in COMMANDS)


@pytest.mark.parametrize("where,words", COMMANDS, ids=[where for where, _ in COMMANDS])
def test_a_documented_command_uses_only_real_flags(where, words):
    path = command_path(words)
    assert path in FLAGS, f"{where}: gcloud {' '.join(path)} is not one of the commands checked here"
    used = [flag for flag, _ in flags_of(words)]
    unknown = [flag for flag in used if flag not in FLAGS[path] | GLOBAL]
    assert not unknown, f"{where}: gcloud {' '.join(path)} has no {unknown}"
    for group in EXCLUSIVE[path]:
        assert len(group & set(used)) <= 1, f"{where}: {sorted(group & set(used))} exclude each other"


@pytest.mark.parametrize("where,words", COMMANDS, ids=[where for where, _ in COMMANDS])
def test_what_a_command_names_exists(where, words):
    values = dict(flags_of(words))
    path = command_path(words)
    for flag in ("--config", "--ignore-file", "--metadata-file"):
        if flag in values:
            assert values[flag] and (ROOT / values[flag]).is_file(), f"{where}: {flag} {values[flag]}"
    if path == ("builds", "submit"):
        assert values.get("--config") != "-", f"{where}: --config - is a file named '-', not standard input"
        assert "--config" in values and "_IMAGE=" in (values.get("--substitutions") or "")
        assert words[-1] == "."  # the repository root is the source
    if path == ("dataflow", "flex-template", "build"):
        assert values["--sdk-language"] == "PYTHON" and values["--image"]


def test_a_run_passes_the_worker_image_and_only_known_parameters():
    metadata = json.loads((ROOT / "templates" / "flex" / "metadata.json").read_text())
    template = {p["name"] for p in metadata["parameters"]}
    runs = [(where, words) for where, words in COMMANDS if command_path(words) == ("dataflow", "flex-template", "run")]
    assert runs
    for where, words in runs:
        given = {}
        for flag, value in flags_of(words):
            if flag == "--parameters":
                given.update(item.split("=", 1) for item in value.split(","))
        assert given.get("sdk_container_image"), f"{where}: the workers need the image (sdk_container_image)"
        assert "spec" in given
        for name in given:
            assert name in template or beam_knows(f"--{name}"), f"{where}: {name} is no parameter"
    builds = [dict(flags_of(words))["--image"] for _, words in COMMANDS
              if command_path(words) == ("dataflow", "flex-template", "build")]
    assert builds and all(image == builds[0] for image in builds)
    images = {"_IMAGE=" + dict(flags_of(words))["--substitutions"].split("_IMAGE=", 1)[1].split(",")[0]
              for _, words in COMMANDS if command_path(words) == ("builds", "submit")}
    assert images == {f"_IMAGE={builds[0]}"}  # one image: built, put in the template, run by the workers
    for _, words in runs:
        workers = [v.split("=", 1)[1] for f, v in flags_of(words) if f == "--parameters" and
                   v.startswith("sdk_container_image=")]
        assert workers == [builds[0]]
