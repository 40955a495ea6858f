import builtins

import secfindings
from secfindings import errors


def test_all_is_sorted_and_importable():
    assert secfindings.__all__ == sorted(secfindings.__all__)
    for name in secfindings.__all__:
        assert hasattr(secfindings, name), name


def test_error_hierarchy_matches_api_md():
    assert issubclass(errors.ConfigurationError, errors.SecFindingsError)
    assert issubclass(errors.ConfigurationError, ValueError)
    assert issubclass(errors.ValidationError, ValueError)
    assert issubclass(errors.TransportError, ConnectionError)
    assert issubclass(errors.TimeoutError, errors.TransportError)
    assert issubclass(errors.TimeoutError, builtins.TimeoutError)
    assert issubclass(errors.RateLimitError, errors.APIStatusError)
    assert issubclass(errors.GraphQLError, errors.SecFindingsError)
    assert issubclass(errors.AuthenticationError, errors.SecFindingsError)
    assert set(errors.__all__) <= set(secfindings.__all__)


def test_rate_limit_error_fields():
    e = errors.RateLimitError("slow down", retry_after=3.0, headers={"retry-after": "3"})
    assert e.status_code == 429
    assert e.retry_after == 3.0
    assert str(e) == "slow down"


def test_version():
    assert secfindings.__version__.count(".") == 2


def test_the_version_comes_from_one_place():
    import importlib.metadata
    import os
    import re
    from pathlib import Path

    import pytest

    # The installed-wheel smoke (scripts/wheel_test.sh) runs a copy of the tests outside the
    # source tree and names the tree in SECFINDINGS_SOURCE_ROOT: the wheel's version is checked too.
    root = Path(os.environ.get("SECFINDINGS_SOURCE_ROOT") or Path(__file__).resolve().parent.parent)
    if not (root / "Cargo.toml").exists():
        pytest.skip("run from outside the source tree without SECFINDINGS_SOURCE_ROOT")
    cargo = (root / "Cargo.toml").read_text()
    version = re.search(r'\[workspace\.package\]\s*\nversion = "([^"]+)"', cargo)
    assert version is not None
    assert secfindings.__version__ == version.group(1)
    assert importlib.metadata.version("secfindings") == version.group(1)
    changelog = (root / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in changelog or f"## [{version.group(1)}]" in changelog
