"""Which Debian packages the second-generation corpus may use: the licence rule.

A package is kept iff its /usr/share/doc/<package>/copyright file exists (in its own .deb or
in another binary package of the same source) and every licence it names is on ALLOWED, the
DFSG-free licences that allow copying, modification and redistribution for any purpose
(training a model on the code and distributing the model included):
permissive (MIT/Expat, BSD, Apache, PSF, ISC, Zlib, ...), weak and strong copyleft
(LGPL, GPL, AGPL, MPL, EPL, ...), and public domain / CC0. Anything else (a licence name
this file does not know, "other", "custom", a non-commercial clause, or a copyright file
with no recognisable licence at all) excludes the whole package: unclear means out.

Machine-readable copyright files (DEP-5, "Format: .../copyright-format/...") are read by their
`License:` fields; a short name that is not on the list is judged by the text of its
standalone `License:` paragraph. Free-form copyright files are judged by the licence texts
and names they quote (TEXT_PATTERNS). `--permissive-only` (debian_corpus.py) drops copyleft
too, for a corpus that must not contain GPL code.
"""
import re

# canonical name -> regex on a normalised DEP-5 short name (lower case, no "+", no version
# suffix like "-or-later", no "with ... exception").
ALLOWED = {
    "MIT": r"(expat|mit|mit-.*|x11|mit/x11|mit/expat|ntp|hpnd.*|curl|bsd-like|mit-like|mit-style|bsd-style)",
    "BSD": r"(bsd|bsd-\d-clause.*|0bsd|bsd-\d+|new-bsd|modified-bsd|bsd-new|3-clause-bsd|2-clause-bsd|bsd \d.*|bsd-\d clause)",
    "Apache": r"(apache|apache-\d(\.\d)?|asl-?2(\.0)?|apache-2(\.0)?-(with-)?llvm-exceptions?)",
    "PSF": r"(psf|psf-\d(\.\d)?|psfl|python|python-\d(\.\d)?|cnri-python.*|psf-license|python-software-foundation)",
    "ISC": r"(isc|isc-like)",
    "Zlib": r"(zlib|libpng|zlib/libpng)",
    "Zope": r"(zpl|zpl-\d(\.\d)?|zope|zope-\d(\.\d)?)",
    "Boost": r"(bsl-1\.0|boost|boost-1\.0)",
    "Unlicense": r"(unlicense|wtfpl|wtfpl-\d|0-clause.*)",
    "public-domain": r"(public-domain|public domain|publicdomain|public_domain|[a-z]+-public-domain|pd|cc0|cc0-1\.0)",
    "CC-BY": r"(cc-by(-sa)?(-\d\.\d)?|cc-by-sa|cc-by)",
    "Artistic": r"(artistic|artistic-\d(\.\d)?|perl|gpl-1\+? or artistic.*)",
    "OFL": r"(ofl|ofl-1\.1|sil-ofl.*)",
    "LGPL": r"(lgpl|lgpl-?\d(\.\d)?)",
    "GPL": r"(gpl|gpl-?\d(\.\d)?)",
    "AGPL": r"(agpl|agpl-\d(\.\d)?)",
    "MPL": r"(mpl|mpl-\d\.\d)",
    "EPL": r"(epl|epl-\d\.\d|edl|edl-1\.0)",
    "CeCILL": r"(cecill|cecill-[bc]|cecill-\d\.\d|cecill-[bc]-\d\.\d)",
    "other-free": r"(afl-\d\.\d|osl-\d\.\d|eupl-\d\.\d|ecl-2\.0|upl-1\.0|ncsa|ms-pl|w3c|w3c-.*|bzip2.*|unicode.*|"
                  r"gfdl.*|cc-by-sa-\d\.\d|fsfap|fsful|fsfullr|postgresql|sip|apsl-2\.0)",
}
COPYLEFT = {"LGPL", "GPL", "AGPL", "MPL", "EPL", "CeCILL", "Artistic", "CC-BY", "OFL"}
_ALLOWED_RE = [(name, re.compile(pattern + r"$")) for name, pattern in ALLOWED.items()]

# Licence texts and names quoted in free-form copyright files (and in DEP-5 standalone
# paragraphs with a name of their own).
TEXT_PATTERNS = {
    "MIT": r"permission is hereby granted, free of charge|\bmit licen[cs]e|\bexpat licen[cs]e",
    "BSD": r"redistribution and use in source and binary forms|\bbsd licen[cs]e|\bbsd-\d-clause",
    "Apache": r"apache licen[cs]e,? version 2|\bapache-2\.0|licensed under the apache licen[cs]e",
    "PSF": r"python software foundation licen[cs]e|\bpsf licen[cs]e|psf license agreement",
    "ISC": r"permission to use, copy, modify,? (and/or |and )?distribute this software",
    "Zlib": r"provided 'as-is', without any express or implied warranty",
    "LGPL": r"gnu (lesser|library) general public licen[cs]e|\blgpl",
    "GPL": r"gnu general public licen[cs]e|\bgpl-?\d",
    "AGPL": r"gnu affero general public licen[cs]e",
    "MPL": r"mozilla public licen[cs]e",
    "Zope": r"zope public licen[cs]e",
    "public-domain": r"\bpublic domain\b|\bcc0\b",
    "Unlicense": r"this is free and unencumbered software released into the public domain",
    "other-free": r"gives unlimited permission to copy|are permitted in any medium without royalty|"
                  r"redistribution and use .{0,60}with or without modification,? (is|are) permitted",
}
_TEXT_RE = {name: re.compile(p, re.I) for name, p in TEXT_PATTERNS.items()}
# A clause that makes a licence non-free for this use, wherever it appears.
RED_FLAGS = re.compile(r"non-?commercial|not for commercial|no commercial use|for research purposes only|"
                       r"academic use only|may not be used for", re.I)


def normalise(name):
    n = name.strip().lower()
    n = re.sub(r"\s+with\s+.*exception.*$", "", n)
    n = re.sub(r"-or-later$|-only$|\+$", "", n).strip()
    return n


def split_expression(expr):
    """'GPL-2+ or Artistic, and BSD' -> ['GPL-2+', 'Artistic', 'BSD']."""
    parts = re.split(r"\s+or\s+|\s+and\s+|\s*,\s*|\s*\|\s*|\s*/\s*(?=[a-z])", expr.strip(), flags=re.I)
    return [p.strip("() ") for p in parts if p.strip("() ")]


def canonical(short_name):
    n = normalise(short_name)
    for name, rx in _ALLOWED_RE:
        if rx.match(n):
            return name
    return None


def from_text(text):
    """Licences named by a free-form text (sorted), by TEXT_PATTERNS."""
    return sorted(name for name, rx in _TEXT_RE.items() if rx.search(text))


def _dep5_paragraphs(text):
    return [p for p in re.split(r"\n\s*\n", text) if p.strip()]


def classify(text):
    """(licences sorted, None) when the package may be used, else (licences seen, reason)."""
    if text is None:
        return [], "no copyright file"
    first = text.lstrip().split("\n", 1)[0].lower()
    dep5 = first.startswith("format:") and ("copyright-format" in first or "dep5" in first or "dep-5" in first)
    if not dep5:
        if RED_FLAGS.search(text):
            return [], "non-free clause"
        found = from_text(text)
        return (found, None) if found else ([], "free-form copyright file, no licence recognised")
    standalone = {}
    names = []
    for para in _dep5_paragraphs(text):
        m = re.search(r"^License:[ \t]*(.*)$", para, re.M | re.I)
        if not m:
            continue
        if re.search(r"^Files:", para, re.M | re.I) or re.search(r"^Format:", para, re.M | re.I):
            names.append(m.group(1))
        else:  # a standalone licence paragraph: its name and full text
            body = para[m.end():]
            standalone[normalise(m.group(1))] = body
            names.append(m.group(1))
    seen, unknown = set(), []
    for expr in names:
        for part in split_expression(expr):
            c = canonical(part)
            if c is None:
                body = standalone.get(normalise(part), "")
                if body and not RED_FLAGS.search(body):
                    guess = from_text(body)
                    if guess:
                        seen.update(guess)
                        continue
                unknown.append(part)
            else:
                seen.add(c)
    if not seen and not unknown:
        return [], "machine-readable copyright file without License fields"
    if unknown:
        return sorted(seen), "unrecognised licence: " + ", ".join(sorted(set(unknown)))[:120]
    return sorted(seen), None
