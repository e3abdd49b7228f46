/**
 * The Python that runs the PyTorch peers (bench/*.py) and the PyTorch references of the tests: $HACRL_TORCH_PYTHON,
 * default Debian's /usr/bin/python3 with python3-torch (what scripts/setup.sh installs). Set it to run them under
 * another PyTorch, e.g. a virtual environment's python3.
 */
export const TORCH_PYTHON = process.env.HACRL_TORCH_PYTHON || '/usr/bin/python3';
