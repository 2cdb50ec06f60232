import pytest
import yaml

from margin.errors import InputError
from margin.guards.guard_file import load_guard_file
from margin.judges.template import parse_template
from margin.studies.config import read_config
from margin.transforms.suites import load_suite
from margin.util.yamlfile import MAX_ALIASES, parse_yaml
from tests.support.cli import margin


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


# -- issue 34, item 4: alias bombs -----------------------------------------------------------

# Nine levels of nine aliases: 9**9 (387 million) strings once expanded, in 400 bytes.
BILLION_LAUGHS = "\n".join(
    ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
) + "\n"


def test_a_few_aliases_are_read_and_too_many_are_refused_at_the_one_too_many():
    assert parse_yaml(b"a: &x [1, 2]\nb: *x\n", "f.yaml")[0] == {"a": [1, 2], "b": [1, 2]}
    many = "a: &x 1\n" + "".join(f"b{i}: *x\n" for i in range(MAX_ALIASES + 1))
    with pytest.raises(InputError) as caught:
        parse_yaml(many, "f.yaml")
    assert (caught.value.path, caught.value.line) == ("f.yaml", MAX_ALIASES + 2)
    assert f"more than {MAX_ALIASES} YAML aliases" in caught.value.message


@pytest.mark.timeout(5)
@pytest.mark.parametrize("load", [
    lambda path: load_suite(str(path)),
    lambda path: load_guard_file(str(path), {}),
    lambda path: parse_template(path.read_bytes(), str(path)),
    lambda path: read_config(path),
], ids=["suite", "guard file", "judge template", "study config"])
def test_a_billion_laughs_is_refused_before_it_expands(tmp_path, load):
    path = tmp_path / "bomb.yaml"
    path.write_text(BILLION_LAUGHS, "utf-8")
    with pytest.raises(InputError, match="aliases expand to more than 100,000 YAML nodes") as caught:
        load(path)
    assert caught.value.path == str(path) and caught.value.line is not None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", [
    ["run", "--guard", "keyword", "--suite", "{bomb}"],
    ["run", "--guard", "{bomb}"],
    ["study", "{bomb}"],
], ids=["suite", "guard file", "study config"])
def test_the_cli_refuses_a_bomb_with_exit_2(tmp_path, command):
    path = tmp_path / "bomb.yaml"
    path.write_text(BILLION_LAUGHS, "utf-8")
    args = [part.format(bomb=path) for part in command]
    proc = margin(*args, "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    assert str(path) in proc.stderr and "aliases expand to more than" in proc.stderr
    assert not (tmp_path / "out").exists()
