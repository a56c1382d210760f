"""The stages of ``trainer.train.train``, one module each: run, data, head, batches, loop."""
