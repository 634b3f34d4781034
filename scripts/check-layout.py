#!/usr/bin/env python3
"""
check-layout.py: the call direction between the folders of src/.

Folders are ranked; a file may include, call or use only what its own
folder or a lower one defines:

    init > citus > purge > {claim, statemachine, requests, streams}
         > store > catalog > base

(the four middle folders share a rank and do not reach each other).  A
lower folder reaches a higher one only through a callback registered at
init.  Checked:
  - includes: a file includes only its own folder's headers or the one
    public header of a lower folder (store/store.h, ...);
  - calls and variables: every symbol an object file of src/ leaves
    undefined (nm -u) and another object of src/ defines must be defined
    in the same folder or a lower one.  The objects are those of the
    build (make first; test/run builds before its suites);
  - PG_VERSION_NUM appears in base/compat.h only;
  - hooks (an assignment to a PostgreSQL *_hook) are installed in
    init/init.c only, and settings (DefineCustom*Variable) defined in
    init/guc.c only.
As every dependency between folders goes to a lower rank, no loop of
dependencies spans two folders.  Exits 1 and lists every violation.

    scripts/check-layout.py [srcdir]      (default: src/ beside scripts/)
"""
import os
import re
import subprocess
import sys

RANK = {'base': 0, 'catalog': 1, 'store': 2,
        'claim': 3, 'statemachine': 3, 'requests': 3, 'streams': 3,
        'purge': 4, 'citus': 5, 'init': 6}
PUBLIC = {'base': 'base/base.h', 'catalog': 'catalog/idem_catalog.h',
          'store': 'store/store.h', 'claim': 'claim/claim.h',
          'statemachine': 'statemachine/statemachine.h',
          'requests': 'requests/requests.h', 'streams': 'streams/streams.h',
          'purge': 'purge/purge.h', 'citus': 'citus/citus.h'}
COMPAT = 'base/compat.h'
HOOKS = 'init/init.c'
GUCS = 'init/guc.c'
# an assignment to one of PostgreSQL's hook variables
HOOK = re.compile(r'\b([A-Z]\w*|planner|post_parse_analyze|shmem_request|'
                  r'shmem_startup|object_access|emit_log|needs_fmgr|fmgr|'
                  r'check_password|get_relation_info|set_rel_pathlist|'
                  r'set_join_pathlist|join_search|create_upper_paths)_hook'
                  r'\s*=[^=]|\brow_security_policy_hook_\w+\s*=[^=]')


def may_reach(frm, to):
    """May a file of folder frm depend on folder to?"""
    return frm == to or RANK[to] < RANK[frm]


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else \
        os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'src')
    src = os.path.normpath(src)
    errors = []
    files = []
    for d in sorted(os.listdir(src)):
        if not os.path.isdir(os.path.join(src, d)):
            if d.endswith(('.c', '.h')):
                errors.append('%s: a source file outside the folders' % d)
            continue
        if d not in RANK:
            errors.append('%s/: a folder without a rank' % d)
            continue
        for f in sorted(os.listdir(os.path.join(src, d))):
            if f.endswith(('.c', '.h')):
                files.append((d, f))

    # includes, and the version tests
    for d, f in files:
        rel = d + '/' + f
        with open(os.path.join(src, rel)) as fh:
            text = fh.read()
        for n, line in enumerate(text.splitlines(), 1):
            if 'PG_VERSION_NUM' in line and rel != COMPAT:
                errors.append('%s:%d: PG_VERSION_NUM outside %s' % (rel, n, COMPAT))
            code = line.split('/*')[0]
            if HOOK.search(code) and rel != HOOKS:
                errors.append('%s:%d: installs a hook outside %s' % (rel, n, HOOKS))
            if 'DefineCustom' in code and rel != GUCS:
                errors.append('%s:%d: defines a setting outside %s' % (rel, n, GUCS))
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m:
                continue
            inc = m.group(1)
            if '/' not in inc:
                if os.path.exists(os.path.join(src, d, inc)) or \
                   not os.path.exists(os.path.join(src, inc)):
                    continue        # own folder, or a server header
            top = inc.split('/')[0]
            if top not in RANK or not os.path.exists(os.path.join(src, inc)):
                continue            # a server header such as catalog/pg_class.h
            if top == d:
                errors.append('%s:%d: includes its own folder as "%s"; write "%s"'
                              % (rel, n, inc, inc.split('/', 1)[1]))
            elif not may_reach(d, top):
                errors.append('%s:%d: includes "%s" of a higher folder'
                              % (rel, n, inc))
            elif inc != PUBLIC.get(top):
                errors.append('%s:%d: includes "%s", not the public header %s'
                              % (rel, n, inc, PUBLIC.get(top)))

    # symbols: who defines what, who uses what
    defined = {}
    used = []
    objs = [(d, f[:-2] + '.o') for d, f in files if f.endswith('.c')]
    for d, o in objs:
        path = os.path.join(src, d, o)
        if not os.path.exists(path):
            errors.append('%s/%s: not built (run make first)' % (d, o))
            continue
        out = subprocess.run(['nm', '-P', path], check=True,
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) < 2:
                continue
            sym, kind = parts[0], parts[1]
            if kind == 'U':
                used.append((d, o, sym))
            elif kind in 'TDBRCGS':
                defined.setdefault(sym, (d, o))
    for d, o, sym in used:
        if sym in defined:
            td, to = defined[sym]
            if not may_reach(d, td):
                errors.append('%s/%s: uses %s of %s/%s, a higher folder'
                              % (d, o[:-2] + '.c', sym, td, to[:-2] + '.c'))

    for e in errors:
        print('layout: ' + e)
    if errors:
        print('layout: %d violation(s)' % len(errors))
        return 1
    print('layout: %d files in %d folders, calls go down'
          % (len(files), len(set(d for d, f in files))))
    return 0


if __name__ == '__main__':
    sys.exit(main())
