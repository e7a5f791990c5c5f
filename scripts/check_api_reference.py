#!/usr/bin/python3
"""Checks the API reference that `doxygen docs/Doxyfile` wrote into build/docs: every public entity has a
comment of its own, and none leaves its errors to a `detail` function.

usage: check_api_reference.py [BUILD_DOCS_DIR]    (default: build/docs; run from the repository's root)

Public means: declared under include/bufferqueue/, outside folders and namespaces named `detail` (the
Doxyfile leaves those out), and not private. The check fails (exit 1), naming each entity at fault, on
  - any warning Doxygen wrote to BUILD_DOCS_DIR/warnings.log (WARN_IF_UNDOCUMENTED: a class, member,
    field, type alias or function with no comment; WARN_IF_DOC_ERROR: a broken documentation command);
  - a public entity without a comment in the XML inventory (BUILD_DOCS_DIR/xml), which also lists what
    Doxygen does not warn about: concepts, enumerators, namespaces;
  - a public entity whose comment sends the reader to a `detail::` entity (the reference omits them:
    "see `detail::make_mmap_topic` for what it throws");
  - a public function defined in a header that calls `detail::f(...)`, where the comment of `f` says
    what it throws while the public function's own comment names no error at all.
Uses only the standard library.
"""

import os
import re
import sys
import xml.etree.ElementTree as ElementTree

# Namespaces the headers only add specializations or forward declarations to (std::is_error_code_enum,
# prometheus::Collectable): their own documentation is not ours to write; our specializations are checked.
FOREIGN_NAMESPACES = {"std", "boost", "boost::asio", "boost::system", "prometheus"}
# Words by which a comment states what a function throws or how it fails.
ERROR_WORDS = re.compile(r"\bthrows?\b|\berrc::|\berrors?\b|\bfails?\b|\bnoexcept\b|\bnever throws\b", re.IGNORECASE)
DETAIL_REFERENCE = re.compile(r"\b((?:\w+::)*detail::\w+)")


def relative(path):
    """A path of the XML (Doxyfile: STRIP_FROM_PATH = include) relative to the repository."""
    if os.path.isabs(path):
        return os.path.relpath(path)
    return path if os.path.exists(path) else os.path.join("include", path)


def text_of(element):
    """The documentation text of a memberdef or compounddef: brief, detailed and in-body descriptions."""
    parts = []
    for tag in ("briefdescription", "detaileddescription", "inbodydescription"):
        found = element.find(tag)
        if found is not None:
            parts.append("".join(found.itertext()))
    return " ".join(" ".join(parts).split())


def is_detail(qualified_name):
    return "detail" in qualified_name.split("::")


def where(element):
    location = element.find("location")
    if location is None:
        return "?"
    return f"{relative(location.get('file'))}:{location.get('line')}"


def doxygen_warnings(docs):
    """Every line of Doxygen's warning log, with paths relative to the repository."""
    path = os.path.join(docs, "warnings.log")
    if not os.path.exists(path):
        return [f"{path}: missing (did doxygen run with docs/Doxyfile?)"]
    problems = []
    with open(path, encoding="utf-8", errors="replace") as file:
        for line in file:
            line = line.rstrip("\n")
            if line.strip():
                problems.append(line.replace(os.getcwd() + os.sep, ""))
    return problems


def public_entities(docs):
    """Yields (qualified name, kind, element, is_compound) for every public entity of the XML inventory."""
    index = ElementTree.parse(os.path.join(docs, "xml", "index.xml")).getroot()
    for compound in index.findall("compound"):
        kind = compound.get("kind")
        if kind not in ("class", "struct", "union", "namespace", "concept"):
            continue
        tree = ElementTree.parse(os.path.join(docs, "xml", compound.get("refid") + ".xml"))
        for definition in tree.getroot().findall("compounddef"):
            name = definition.findtext("compoundname")
            if is_detail(name) or definition.get("prot") == "private":
                continue
            if not (kind == "namespace" and name in FOREIGN_NAMESPACES):
                yield name, kind, definition, True
            for section in definition.findall("sectiondef"):
                for member in section.findall("memberdef"):
                    # A deleted function (`X(const X&) = delete`) is no entity a user can call; the
                    # class's comment says what it cannot do.
                    if member.get("prot") == "private" or member.findtext("argsstring", "").endswith("=delete"):
                        continue
                    member_name = f"{name}::{member.findtext('name')}"
                    yield member_name, member.get("kind"), member, False
                    for value in member.findall("enumvalue"):
                        if value.find("location") is None and member.find("location") is not None:
                            value.append(member.find("location"))  # an enumerator has none of its own
                        yield f"{member_name}::{value.findtext('name')}", "enumerator", value, False


def detail_comments(include_root):
    """Maps each function name declared under a `detail` namespace of the headers to the comments
    (/// blocks) written directly above its declarations."""
    comments = {}
    declaration = re.compile(r"^\s*(?:[\w:<>,&*\s\[\]]+?\s)?[&*]?(\w+)\s*\(")
    for root, _, files in os.walk(include_root):
        for name in sorted(files):
            if not name.endswith(".hpp"):
                continue
            with open(os.path.join(root, name), encoding="utf-8") as file:
                lines = file.read().split("\n")
            for number, line in enumerate(lines):
                found = declaration.match(line)
                if not found or line.lstrip().startswith(("//", "return", "if", "for", "while", "throw")):
                    continue
                block = []
                above = number - 1
                while above >= 0 and re.match(r"^\s*(template\b|requires\b|\[\[|inline\b)", lines[above]):
                    above -= 1
                while above >= 0 and lines[above].lstrip().startswith("///"):
                    block.insert(0, lines[above].lstrip()[3:].strip())
                    above -= 1
                if block:
                    comments.setdefault(found.group(1), []).append(" ".join(block))
    return comments


def detail_calls(member, detail_docs):
    """The `detail::` functions the body of `member` calls whose comments say what they throw."""
    location = member.find("location")
    if location is None or location.get("bodyfile") is None or location.get("bodystart") in (None, "-1"):
        return []
    start, end = int(location.get("bodystart")), int(location.get("bodyend"))
    if end < start:
        return []
    with open(relative(location.get("bodyfile")), encoding="utf-8") as file:
        body = "\n".join(file.read().split("\n")[start - 1 : end])
    called = []
    for name in re.findall(r"\bdetail::(\w+)\s*(?:<[^;()]*>)?\s*\(", body):
        if any(ERROR_WORDS.search(comment) for comment in detail_docs.get(name, [])) and name not in called:
            called.append(name)
    return called


def main():
    docs = sys.argv[1] if len(sys.argv) > 1 else "build/docs"
    warnings = doxygen_warnings(docs)
    problems = [f"doxygen: {warning}" for warning in warnings]
    warned_at = {warning.split(": warning:")[0] for warning in warnings}  # "file:line", said once
    detail_docs = detail_comments("include/bufferqueue")
    checked = 0
    for name, kind, element, is_compound in public_entities(docs):
        checked += 1
        text = text_of(element)
        if not text:
            if where(element) not in warned_at:
                problems.append(f"{where(element)}: {name} ({kind}) has no comment of its own")
            continue
        referenced = DETAIL_REFERENCE.findall(text)
        if referenced:
            problems.append(
                f"{where(element)}: the comment of {name} ({kind}) refers to {', '.join(sorted(set(referenced)))}, "
                "which the reference leaves out: state the contract (what it does, allocates, throws) here"
            )
        if not is_compound and kind == "function" and not ERROR_WORDS.search(text):
            for called in detail_calls(element, detail_docs):
                problems.append(
                    f"{where(element)}: {name} calls detail::{called}, whose comment says what it throws, but "
                    f"its own comment names no error: document the errors on {name}"
                )
    for problem in problems:
        print(f"api reference: {problem}", file=sys.stderr)
    if problems:
        print(
            f"api reference: FAILED, {len(problems)} problem(s); every public entity of include/bufferqueue/ "
            "needs a contract comment of its own (docs/Doxyfile, scripts/check_api_reference.py)",
            file=sys.stderr,
        )
        return 1
    if checked < 100:
        print(f"api reference: only {checked} public entities found in {docs}/xml; the inventory is incomplete",
              file=sys.stderr)
        return 1
    print(f"api reference: {checked} public entities, each with a comment of its own; {docs}/html/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
