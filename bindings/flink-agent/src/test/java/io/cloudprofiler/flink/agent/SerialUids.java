package io.cloudprofiler.flink.agent;

import java.io.ObjectStreamClass;

/** For a child JVM: prints "CLASS SERIALVERSIONUID" for each class named. */
public final class SerialUids {
    public static void main(String[] args) throws Exception {
        for (String c : args) System.out.println(c + " " + ObjectStreamClass.lookup(Class.forName(c)).getSerialVersionUID());
    }
}
