import pytest
import yaml

from margin.errors import InputError
from margin.guards.guard_file import load_guard_file
from margin.judges.template import parse_template
from margin.studies.config import read_config
from margin.util.yamlfile import parse_yaml


def test_data_and_the_node_that_knows_each_keys_line():
    data, node = parse_yaml(b"a: 1\nb:\n  c: x\n", "f.yaml")
    assert data == {"a": 1, "b": {"c": "x"}}
    assert isinstance(node, yaml.MappingNode)
    assert [(key.value, key.start_mark.line + 1) for key, _ in node.value] == [("a", 1), ("b", 2)]
    assert parse_yaml(b"", "f.yaml") == (None, None)


def test_bad_yaml_names_the_file_and_the_line():
    with pytest.raises(InputError) as caught:
        parse_yaml(b"a: 1\nb: [1, 2\nc: 3\n", "f.yaml")
    assert caught.value.path == "f.yaml" and caught.value.line == 3
    assert caught.value.message.startswith("not valid YAML: ")


def test_text_that_is_not_utf8_is_refused():
    with pytest.raises(InputError) as caught:
        parse_yaml(b"a: caf\xe9\n", "f.yaml")
    assert (caught.value.path, caught.value.line, caught.value.message) == ("f.yaml", None, "not UTF-8 text")


@pytest.mark.parametrize("load", [
    lambda path: load_guard_file(str(path), {}),
    lambda path: parse_template(path.read_bytes(), str(path)),
    lambda path: read_config(path),
], ids=["guard file", "judge template", "study config"])
def test_every_yaml_input_refuses_bad_text_the_same_way(tmp_path, load):
    path = tmp_path / "x.yaml"
    path.write_bytes(b"a: caf\xe9\n")
    with pytest.raises(InputError, match="not UTF-8 text"):
        load(path)
    path.write_bytes(b"a: 1\nb: [1, 2\nc: 3\n")
    with pytest.raises(InputError) as caught:
        load(path)
    assert caught.value.line == 3 and caught.value.path == str(path)
