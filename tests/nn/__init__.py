"""srcgrad.nn, srcgrad.optim and srcgrad.data: layers, optimizers, schedulers, against PyTorch
where it is installed."""
