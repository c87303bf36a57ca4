"""Stand-in for ansible-test's get-pip bootstrap script, which is downloaded from a host we cannot reach.

ansible-test runs this file as a module with pip's arguments. We run pip from the wheel that Python's
own ensurepip bundles, and let it install the pip version ansible-test asked for from the configured
package index (PyPI or a site mirror).
"""
import glob
import os
import sys

import ensurepip


def main():
    wheels = glob.glob(os.path.join(os.path.dirname(ensurepip.__file__), '_bundled', 'pip-*.whl'))
    if not wheels:
        sys.exit('ensurepip has no bundled pip wheel')
    sys.path.insert(0, wheels[0])
    from pip._internal.cli.main import main as pip_main  # pylint: disable=import-outside-toplevel

    args = [arg for arg in sys.argv[1:] if arg not in ('--no-setuptools', '--no-wheel')]
    sys.exit(pip_main(['install'] + args))


if __name__ == '__main__':
    main()
