"""The calibrated roofline that generates profiles: hardware and model catalogues,
user-given GPU specs and model configs, tensor parallelism, and the fitted operator
costs (``calibration/``)."""
