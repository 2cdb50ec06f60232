import pytest
from pydantic import ValidationError

from margin.guards.spec import GuardSpec
from margin.studies.models import ModelSpec


@pytest.mark.parametrize("make", [
    lambda env: GuardSpec(name="keyword", api_key_env=env),
    lambda env: ModelSpec(model="m", base_url="http://127.0.0.1:1/v1", api_key_env=env),
], ids=["guard", "model"])
def test_a_spec_names_the_keys_variable_and_never_holds_the_key(make):
    assert make("MY_KEY_2").api_key_env == "MY_KEY_2"
    assert make(None).api_key_env is None
    for key in ("sk-abc123", "2KEY", "MY KEY", ""):
        with pytest.raises(ValidationError, match="must be the NAME of an environment variable, not a key"):
            make(key)
