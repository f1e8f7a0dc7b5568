"""The modes: reverse, forward (jvp), higher order (hvp, hessian, grad of grad), batched columns,
Jacobians."""
