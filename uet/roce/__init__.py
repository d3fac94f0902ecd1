"""RoCEv2 comparison transport (RC queue pairs, go-back-N, DCQCN): not written yet."""
