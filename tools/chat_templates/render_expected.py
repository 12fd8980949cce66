#!/usr/bin/env python3
"""Renders every chat template x conversation in tests/data/chat_templates with
python3-jinja2, configured the way HuggingFace transformers' apply_chat_template
renders chat templates, and writes tests/data/chat_templates/expected.json.

These outputs are the reference that tests/chat_template_test.cc holds our C++
renderer to, byte for byte. jinja2 is a test-data tool only (apt-get install
python3-jinja2); nothing at build or run time needs it.

What transformers does (transformers/utils/chat_template_utils.py):
  - ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
    extensions=[jinja2.ext.loopcontrols]);
  - tojson replaced by json.dumps(x, ensure_ascii=False, indent=indent,
    separators=separators, sort_keys=sort_keys);
  - globals raise_exception (raises TemplateError(message)) and strftime_now;
  - render(messages=..., tools=tools or None, documents=None,
    add_generation_prompt=..., bos_token=..., eos_token=..., **extra).

A render that raises is recorded as an expected error, with whether it came
from the template's raise_exception (then its message must match too).

    tools/chat_templates/render_expected.py
"""
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "chat_templates")


class RaisedByTemplate(jinja2.exceptions.TemplateError):
    pass


def raise_exception(message):
    raise RaisedByTemplate(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(date_format):
    return datetime.datetime.now().strftime(date_format)


def make_environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    env = make_environment()
    with open(os.path.join(DATA, "templates.json"), encoding="utf-8") as f:
        templates = json.load(f)
    with open(os.path.join(DATA, "conversations.json"), encoding="utf-8") as f:
        data = json.load(f)
    cases = []
    for name, tokens in templates.items():
        with open(os.path.join(DATA, name + ".jinja"), encoding="utf-8", newline="") as f:
            template = env.from_string(f.read())
        for conversation in data["conversations"]:
            extra = dict(data["common_extra"])
            extra.update(conversation.get("extra", {}))
            tools = extra.pop("tools", None)
            case = {"template": name, "conversation": conversation["name"]}
            try:
                case["output"] = template.render(
                    messages=conversation["messages"], tools=tools, documents=None,
                    add_generation_prompt=conversation["add_generation_prompt"],
                    bos_token=tokens["bos_token"], eos_token=tokens["eos_token"], **extra)
            except RaisedByTemplate as e:
                case["error"] = e.message
                case["raise_exception"] = True
            except Exception as e:  # jinja2 and Python errors: the template cannot render this input
                case["error"] = f"{type(e).__name__}: {e}"
                case["raise_exception"] = False
            cases.append(case)
    out = {"generator": f"tools/chat_templates/render_expected.py with jinja2 {jinja2.__version__}", "cases": cases}
    with open(os.path.join(DATA, "expected.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
    errors = sum("error" in c for c in cases)
    print(f"{len(cases)} cases ({len(templates)} templates x {len(data['conversations'])} conversations), "
          f"{errors} expected errors", file=sys.stderr)


if __name__ == "__main__":
    main()
