#!/usr/bin/env python3
"""
check-doc-links.py: every relative link of the documentation resolves.

Reads README.md, docs/*.md, bench/README.md and every README.md under
src/, and checks each markdown link [text](target) that is not a URL: the
file must exist (relative to the linking file), and an #anchor must be
the GitHub anchor of a heading of the target (or of the linking file, for
a bare #anchor).  Links inside fenced code blocks are not links.  Exits 1
and lists every broken link.

    scripts/check-doc-links.py [root]      (default: the tree above scripts/)
"""
import glob
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else \
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def prose(path):
    """The lines of a file outside fenced code blocks, numbered."""
    out, fenced = [], False
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            if re.match(r'^\s*(```|~~~)', line):
                fenced = not fenced
                continue
            if not fenced:
                out.append((n, line))
    return out


def slug(heading):
    """GitHub's anchor of a heading: lowercase, punctuation dropped,
    spaces to hyphens."""
    text = re.sub(r'`', '', heading.strip().lower())
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', text)
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


anchors_of = {}


def anchors(path):
    if path not in anchors_of:
        seen, found = {}, set()
        for _, line in prose(path):
            m = re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
            if m:
                s = slug(m.group(1))
                k = seen.get(s, 0)
                found.add(s if k == 0 else '%s-%d' % (s, k))
                seen[s] = k + 1
        anchors_of[path] = found
    return anchors_of[path]


files = [os.path.join(root, 'README.md')]
files += sorted(glob.glob(os.path.join(root, 'docs', '*.md')))
files += [os.path.join(root, 'bench', 'README.md')]
files += sorted(glob.glob(os.path.join(root, 'src', '**', 'README.md'), recursive=True))
link = re.compile(r'\[[^\]]*\]\(([^)\s]+)\)')
broken = []
checked = 0
for path in files:
    if not os.path.exists(path):
        broken.append('%s: missing' % os.path.relpath(path, root))
        continue
    for n, line in prose(path):
        for target in link.findall(line):
            if re.match(r'^[a-z][a-z0-9+.-]*:', target):
                continue            # http:, https:, mailto:
            checked += 1
            file, _, anchor = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) \
                if file else path
            where = '%s:%d: %s' % (os.path.relpath(path, root), n, target)
            if not os.path.exists(dest):
                broken.append(where + ' (no such file)')
            elif anchor and dest.endswith('.md') and anchor not in anchors(dest):
                broken.append(where + ' (no such heading)')
            elif anchor and not dest.endswith('.md'):
                broken.append(where + ' (an anchor into a file without headings)')
for b in broken:
    print(b)
print('check-doc-links: %d links in %d files, %d broken' % (checked, len(files), len(broken)))
sys.exit(1 if broken else 0)
