package io.cloudprofiler.flink.agent;

import static net.bytebuddy.matcher.ElementMatchers.hasSuperClass;
import static net.bytebuddy.matcher.ElementMatchers.isAbstract;
import static net.bytebuddy.matcher.ElementMatchers.isConstructor;
import static net.bytebuddy.matcher.ElementMatchers.nameStartsWith;
import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.not;
import static net.bytebuddy.matcher.ElementMatchers.takesArgument;
import static net.bytebuddy.matcher.ElementMatchers.takesArguments;

import java.io.IOException;
import java.io.InputStream;
import java.lang.instrument.Instrumentation;
import java.util.List;
import java.util.Properties;

import net.bytebuddy.agent.builder.AgentBuilder;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.description.modifier.FieldPersistence;
import net.bytebuddy.description.modifier.Visibility;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.dynamic.DynamicType;
import net.bytebuddy.implementation.FieldAccessor;
import net.bytebuddy.matcher.ElementMatcher;
import net.bytebuddy.utility.JavaModule;

/**
 * The Java agent that marks every operator instance of an unmodified Flink
 * job: one line in the Flink configuration,
 * {@code env.java.opts.taskmanager: -javaagent:/path/to/cloudprofiler-flink-agent-0.1.0.jar}
 * (docs/flink-agent.md). Flink 2.x has no plugin that sees records (its
 * plugins are file systems, metric reporters and the like), so the agent
 * adds its marks to Flink's own operator classes as the TaskManager loads
 * them:
 *
 * <ul>
 *   <li>{@code AbstractStreamOperator.setup}: the operator gets an {@link At}
 *       (its name and subtask) and its output is wrapped in a {@link MarkingOutput};</li>
 *   <li>{@code processElement}, {@code processElement1} and {@code processElement2}
 *       of every concrete operator class below it (Flink's own, a SQL
 *       query's generated ones, the user's): {@code in} as a record
 *       arrives, {@code out} and {@code sent} around each record it emits
 *       while on it, {@code out} as a sink's visit ends;</li>
 *   <li>{@code onEventTime} and {@code onProcessingTime} of the same classes: a
 *       timer's firing is a visit of its own ({@link TimerAdvice});</li>
 *   <li>{@code AbstractStreamOperator.close}: the marks closed (flushed).</li>
 * </ul>
 *
 * Nothing here may fail a job: a Flink version the agent does not know, a
 * class it cannot change, an instance whose channels cannot open, each
 * leaves that part unmarked and says so on the TaskManager's stderr.
 */
public final class Agent {
    private Agent() {}

    /** The Flink versions (major.minor) whose operator classes the agent was built and tested against. */
    static final List<String> KNOWN = List.of("2.3");

    static final String OPERATOR = "org.apache.flink.streaming.api.operators.AbstractStreamOperator";
    static final String RECORD = "org.apache.flink.streaming.runtime.streamrecord.StreamRecord";
    static final String TIMER = "org.apache.flink.streaming.api.operators.InternalTimer";

    public static void premain(String args, Instrumentation inst) {
        try {
            Carried.on = args != null && List.of(args.split(",")).contains("ids");
            Log.say(install(inst));
        } catch (Throwable t) {
            Log.say("not installed, this JVM runs unprofiled: " + t);
        }
    }

    /** Installs the transformations when Flink's version is one it knows; says what it did. */
    static String install(Instrumentation inst) {
        String v = flinkVersion(ClassLoader.getSystemClassLoader());
        if (v == null) {
            return "no Flink runtime on this JVM's class path (no .flink-runtime.version.properties): nothing marked";
        }
        if (!known(v)) {
            return "Flink " + v + " is not a version this agent knows (" + String.join(", ", KNOWN)
                    + "): nothing marked, the job runs unprofiled";
        }
        ElementMatcher.Junction<TypeDescription> operator = named(OPERATOR);
        // AbstractStreamOperator gets a field, an interface and advice. Its
        // serialVersionUID is declared (1), so the JobManager, which runs
        // without the agent, and the TaskManagers still agree on it; the
        // field is transient, so an operator serialized here carries nothing of ours.
        new AgentBuilder.Default()
                .with(new Failures())
                .ignore(ignored())
                .type(operator)
                .transform((DynamicType.Builder<?> b, TypeDescription t, ClassLoader cl, JavaModule m, java.security.ProtectionDomain pd) -> b
                        .defineField(At.FIELD, At.class, Visibility.PUBLIC, FieldPersistence.TRANSIENT)
                        .implement(Marked.class).intercept(FieldAccessor.ofField(At.FIELD))
                        .visit(Advice.to(SetupAdvice.class).on(named("setup").and(takesArguments(3))))
                        .visit(Advice.to(CloseAdvice.class).on(named("close").and(takesArguments(0)))))
                .installOn(inst);
        if (Carried.on) {
            // The network path between tasks carries ids: RecordWriterOutput
            // writes each record's, the network input reads it (IdsAdvice).
            new AgentBuilder.Default()
                    .with(new Failures())
                    .ignore(ignored())
                    .type(named("org.apache.flink.streaming.runtime.io.RecordWriterOutput"))
                    .transform((DynamicType.Builder<?> b, TypeDescription t, ClassLoader cl, JavaModule m, java.security.ProtectionDomain pd) -> b
                            .visit(Advice.to(IdsAdvice.Writer.class).on(isConstructor().and(takesArguments(4)))))
                    .type(named("org.apache.flink.streaming.runtime.io.AbstractStreamTaskNetworkInput"))
                    .transform((DynamicType.Builder<?> b, TypeDescription t, ClassLoader cl, JavaModule m, java.security.ProtectionDomain pd) -> b
                            .visit(Advice.to(IdsAdvice.Reader.class).on(isConstructor())))
                    .installOn(inst);
        }
        // Its subclasses only get advice inlined into processElement, and
        // must keep their shape exactly (DECORATE: no member added, no
        // static initializer): many declare no serialVersionUID (a SQL
        // query's OutputConversionOperator, a user's own operator), so
        // Java derives it from the class's members, and the JobManager
        // serializes the operator with the class as it is. Rebased (Byte
        // Buddy's default), the class failed to deserialize on a
        // TaskManager with the agent ("local class incompatible").
        new AgentBuilder.Default()
                .with(AgentBuilder.TypeStrategy.Default.DECORATE)
                .with(AgentBuilder.InitializationStrategy.NoOp.INSTANCE) // inlined advice needs no type initializer
                .with(new Failures())
                .ignore(ignored())
                .type(hasSuperClass(operator).and(not(operator)).and(not(isAbstract())))
                .transform((DynamicType.Builder<?> b, TypeDescription t, ClassLoader cl, JavaModule m, java.security.ProtectionDomain pd) -> b
                        .visit(Advice.to(ProcessAdvice.class).on(
                                named("processElement").or(named("processElement1")).or(named("processElement2"))
                                        .and(takesArguments(1)).and(takesArgument(0, named(RECORD))).and(not(isAbstract()))))
                        .visit(Advice.to(TimerAdvice.class).on(
                                named("onEventTime").or(named("onProcessingTime"))
                                        .and(takesArguments(1)).and(takesArgument(0, named(TIMER))).and(not(isAbstract())))))
                .installOn(inst);
        return "marking the operators of Flink " + v + " (every instance's in, out and sent"
                + (Carried.on ? "; ids carried between tasks, 8 bytes a record" : "") + "; docs/flink-agent.md)";
    }

    /** What neither transformation looks at: ours, Byte Buddy's, the JDK's. */
    static ElementMatcher.Junction<TypeDescription> ignored() {
        return nameStartsWith("net.bytebuddy.").or(nameStartsWith("io.cloudprofiler.")).or(nameStartsWith("java."));
    }

    /** Flink's version as its runtime jar says (project.version), or null when there is none. */
    static String flinkVersion(ClassLoader cl) {
        try (InputStream in = cl.getResourceAsStream(".flink-runtime.version.properties")) {
            if (in == null) return null;
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("project.version");
        } catch (IOException e) {
            return null;
        }
    }

    /** Whether version (2.3.0, 2.3-SNAPSHOT) is of a major.minor the agent knows. */
    static boolean known(String version) {
        for (String k : KNOWN) {
            if (version.equals(k) || version.startsWith(k + ".") || version.startsWith(k + "-")) return true;
        }
        return false;
    }

    /** Says, once per class, where a transformation failed: the class runs unchanged. */
    static final class Failures extends AgentBuilder.Listener.Adapter {

        @Override
        public void onError(String type, ClassLoader cl, JavaModule m, boolean loaded, Throwable t) {
            Log.say(type + " left unmarked: " + t);
        }
    }
}
