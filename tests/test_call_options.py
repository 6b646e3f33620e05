"""The call options: the USE_CLIENT_DEFAULT sentinel and how a timeout is resolved."""

from __future__ import annotations

import copy
import pickle

import pytest

from mcp_sync.call_options import USE_CLIENT_DEFAULT, UseClientDefault, resolve_timeout


def test_the_sentinel_is_one_object_with_a_readable_repr():
    assert repr(USE_CLIENT_DEFAULT) == "USE_CLIENT_DEFAULT"
    assert UseClientDefault() is USE_CLIENT_DEFAULT
    assert copy.copy(USE_CLIENT_DEFAULT) is USE_CLIENT_DEFAULT
    assert copy.deepcopy(USE_CLIENT_DEFAULT) is USE_CLIENT_DEFAULT
    assert pickle.loads(pickle.dumps(USE_CLIENT_DEFAULT)) is USE_CLIENT_DEFAULT


def test_the_sentinel_takes_the_default_and_none_means_no_timeout():
    assert resolve_timeout(USE_CLIENT_DEFAULT, 3.0) == 3.0
    assert resolve_timeout(USE_CLIENT_DEFAULT, None) is None
    assert resolve_timeout(None, 3.0) is None
    assert resolve_timeout(0, 3.0) == 0
    assert resolve_timeout(1.5, None) == 1.5


@pytest.mark.parametrize("bad", [-1, float("nan")])
def test_a_negative_or_nan_timeout_is_refused(bad: float):
    with pytest.raises(ValueError, match="timeout"):
        resolve_timeout(bad, None)
