package io.cloudprofiler.flink.agent;

/** The agent's messages: on stderr, which a TaskManager keeps in its .out file beside its log. */
final class Log {
    private Log() {}

    static void say(String s) {
        System.err.println("cloudprofiler agent: " + s);
    }
}
