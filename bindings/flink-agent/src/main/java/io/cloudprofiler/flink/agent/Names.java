package io.cloudprofiler.flink.agent;

/** An operator's name in its marks' channels. */
final class Names {
    private Names() {}

    /** The longest part of Flink's name kept (a SQL operator's description can run to pages). */
    static final int MAX = 40;

    /**
     * Flink's operator name with whitespace and '#' made '_' (the marking
     * convention's channel names allow neither), cut to {@value #MAX}
     * characters, then "-" and the operator's vertex id in the job's stream
     * graph: two operators of one name (two maps) stay two.
     */
    static String operator(String flinkName, Integer vertex) {
        String s = flinkName == null || flinkName.isEmpty() ? "operator" : flinkName;
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length() && b.length() < MAX; i++) {
            char c = s.charAt(i);
            b.append(Character.isWhitespace(c) || c == '#' ? '_' : c);
        }
        return b + "-" + vertex;
    }
}
