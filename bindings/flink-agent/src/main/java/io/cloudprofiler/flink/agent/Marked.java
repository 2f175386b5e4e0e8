package io.cloudprofiler.flink.agent;

/**
 * What the agent makes AbstractStreamOperator implement: its {@link At}
 * (the field {@value At#FIELD} it adds). The advice around a subclass's
 * processElement reads it through this interface: Byte Buddy describes a
 * subclass from its class file, where the field it added to the superclass
 * is not.
 */
public interface Marked {
    At cp$at();
}
