package io.cloudprofiler.datagen;

/**
 * One sender connection's stream, from its HELLO (datagen/FRAMING.md):
 * {@code thread} of the run's {@code threads}, its first tuple id and the
 * tuples it announced; {@code queue} is the factory's number for the
 * stream (0, 1, 2, ... in the order HELLOs arrived), and a stream's buckets
 * go to consumer {@code queue % consumers}.
 */
public record StreamInfo(long runId, String sender, int thread, int threads, long firstId, long tuples, double rate,
        int queue, String remote) {}
