package io.cloudprofiler.datagen;

import java.io.BufferedInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/** Reads the frames of one connection (FRAMING.md: u32 length, u8 type, body), the body into a reused buffer. */
final class FrameReader {
    private static final VarHandle I64 = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle I32 = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle I16 = MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.BIG_ENDIAN);

    private final InputStream in;
    private final byte[] header = new byte[5];
    private byte[] body = new byte[64 << 10];
    private int length;

    FrameReader(InputStream in) {
        this.in = new BufferedInputStream(in, 64 << 10);
    }

    /**
     * Reads the next frame; returns its type. EOFException if the connection
     * ends (between frames or inside one); MalformedFrame if its length is
     * out of range (checked before anything is allocated).
     */
    int next() throws IOException, ObjectFactory.MalformedFrame {
        readFully(header, 5);
        long n = u32(header, 0);
        if (n < 1 || n > ObjectFactory.MAX_FRAME) {
            throw new ObjectFactory.MalformedFrame("frame length " + n + " out of range 1.." + ObjectFactory.MAX_FRAME);
        }
        length = (int) n - 1;
        if (body.length < length) body = new byte[Math.max(length, Math.min(ObjectFactory.MAX_FRAME, body.length * 2))];
        readFully(body, length);
        return header[4] & 0xff;
    }

    byte[] body() {
        return body;
    }

    int length() {
        return length;
    }

    private void readFully(byte[] b, int n) throws IOException {
        int off = 0;
        while (off < n) {
            int r = in.read(b, off, n - off);
            if (r < 0) throw new EOFException();
            off += r;
        }
    }

    static long u64(byte[] b, int off) {
        return (long) I64.get(b, off);
    }

    static long u32(byte[] b, int off) {
        return Integer.toUnsignedLong((int) I32.get(b, off));
    }

    static int u16(byte[] b, int off) {
        return Short.toUnsignedInt((short) I16.get(b, off));
    }

    static void putU32(byte[] b, int off, int v) {
        I32.set(b, off, v);
    }
}
