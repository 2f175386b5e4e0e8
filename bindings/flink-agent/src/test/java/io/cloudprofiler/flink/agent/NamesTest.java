package io.cloudprofiler.flink.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.cloudprofiler.Marks;
import org.junit.jupiter.api.Test;

/** The agent's names for Flink's operators, and the versions it accepts. */
class NamesTest {
    @Test
    void flinksNamesBecomeChannelNamesTheConventionParses() {
        assertEquals("Map-2", Names.operator("Map", 2));
        assertEquals("Sink:_Writer-12", Names.operator("Sink: Writer", 12));
        assertEquals("Calc[2]-7", Names.operator("Calc[2]", 7));
        assertEquals("a_b-3", Names.operator("a#b", 3));
        assertEquals("operator-1", Names.operator("", 1));
        String sql = Names.operator("GroupAggregate(groupBy=[k], select=[k, COUNT(*) AS c, SUM(v) AS s, MAX(w) AS m])", 9);
        assertEquals(Names.MAX + "-9".length(), sql.length(), sql);
        for (String n : new String[] {"Map-2", "Sink:_Writer-12", sql}) Marks.checkOperator(n); // throws if not
    }

    @Test
    void onlyTheVersionsItKnows() {
        assertTrue(Agent.known("2.3.0"));
        assertTrue(Agent.known("2.3.1"));
        assertTrue(Agent.known("2.3-SNAPSHOT"));
        assertFalse(Agent.known("2.30.0"));
        assertFalse(Agent.known("2.2.0"));
        assertFalse(Agent.known("1.20.0"));
    }
}
