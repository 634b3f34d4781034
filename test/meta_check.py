#!/usr/bin/env python3
"""test/meta_check.py: META.json follows PGXN's meta-spec 1.0.0, every
place that states the version agrees (META.json, idempotency.control, the
install script's name, debian/changelog and CHANGELOG.md), and the install
scripts of released versions are unchanged (test/frozen.sha256).

Exits non-zero and says what is wrong; prints one line per check passed.
"""
import hashlib
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEMVER = re.compile(r'^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+)?$')
LICENSES = {'agpl_3', 'apache_1_1', 'apache_2_0', 'artistic_1', 'artistic_2', 'bsd',
            'freebsd', 'gfdl_1_2', 'gfdl_1_3', 'gpl_1', 'gpl_2', 'gpl_3', 'lgpl_2_1',
            'lgpl_3_0', 'mit', 'mozilla_1_0', 'mozilla_1_1', 'openssl', 'perl_5',
            'postgresql', 'qpl_1_0', 'ssleay', 'sun', 'zlib', 'open_source',
            'restricted', 'unrestricted', 'unknown'}
failures = []


def check(ok, what):
    print(('ok     ' if ok else 'NOT OK ') + what)
    if not ok:
        failures.append(what)


def read(path):
    with open(os.path.join(ROOT, path), encoding='utf-8') as f:
        return f.read()


meta = json.loads(read('META.json'))
for key in ('name', 'abstract', 'version', 'maintainer', 'license', 'provides', 'meta-spec'):
    check(key in meta, f'META.json has the required key "{key}"')
check(meta.get('meta-spec', {}).get('version') == '1.0.0', 'meta-spec version is 1.0.0')
check(SEMVER.match(meta.get('version', '')) is not None, 'the distribution version is semantic')
lic = meta.get('license')
check(isinstance(lic, str) and lic in LICENSES or isinstance(lic, dict), 'the license is a PGXN license name')
check(os.path.exists(os.path.join(ROOT, 'LICENSE')), 'the LICENSE file exists')
check(isinstance(meta.get('maintainer'), (str, list)) and meta['maintainer'], 'a maintainer is named')
for name, ext in meta.get('provides', {}).items():
    check(set(ext) >= {'file', 'version'}, f'provides.{name} has file and version')
    check(os.path.exists(os.path.join(ROOT, ext.get('file', ''))), f'provides.{name}.file exists')
    check(SEMVER.match(ext.get('version', '')) is not None, f'provides.{name}.version is semantic')
for phase, rels in meta.get('prereqs', {}).items():
    check(phase in {'configure', 'build', 'test', 'runtime', 'develop'}, f'prereqs phase "{phase}" is known')
    for rel in rels:
        check(rel in {'requires', 'recommends', 'suggests', 'conflicts'}, f'prereqs relation "{rel}" is known')
res = meta.get('resources', {})
check(set(res) <= {'homepage', 'bugtracker', 'repository'}, 'resources has only known keys')
check('repository' in res and 'type' in res['repository'], 'resources names a repository and its type')

# the versions agree
control = read('idempotency.control')
default = re.search(r"^default_version\s*=\s*'([^']+)'", control, re.M).group(1)
ext = meta['provides']['idempotency']
check(ext['version'] in (default, default + '.0'), f'provides version {ext["version"]} is the control default {default}')
check(ext['file'] == f'idempotency--{default}.sql', 'provides.file is the default version\'s install script')
check(meta['version'].startswith(default), 'the distribution version starts with the default version')
deb = re.match(r'^idempotency \(([^)-]+)-[^)]+\)', read('debian/changelog'))
check(deb is not None and deb.group(1) == default, 'debian/changelog is at the default version')
# an "Unreleased" section may come first (changes not yet in a version)
top = re.search(r'^## (?!Unreleased\b)(\S+)', read('CHANGELOG.md'), re.M)
check(top is not None and top.group(1) == default, 'CHANGELOG.md\'s first version is the default version')
# as pg_buildext updatecontrol writes it: each paragraph naming PGVERSION
# once per major in debian/pgversions
majors = read('debian/pgversions').split()
paragraphs = []
for para in read('debian/control.in').strip('\n').split('\n\n'):
    paragraphs += [para.replace('PGVERSION', v) for v in majors] if 'PGVERSION' in para else [para]
check(read('debian/control') == '\n\n'.join(paragraphs) + '\n',
      'debian/control is debian/control.in for debian/pgversions')

# released install scripts are frozen: a change goes into the next version
for line in read('test/frozen.sha256').splitlines():
    digest, name = line.split()
    with open(os.path.join(ROOT, name), 'rb') as f:
        actual = hashlib.sha256(f.read()).hexdigest()
    check(actual == digest, f'{name} is frozen (released; change the next version instead)')

if failures:
    print(f'{len(failures)} check(s) failed', file=sys.stderr)
    sys.exit(1)
