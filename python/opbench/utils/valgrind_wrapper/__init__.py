"""``torch.utils.benchmark.utils.valgrind_wrapper``: its ``timer_interface`` module."""
