package io.cloudprofiler.datagen;

import java.io.BufferedInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * Reads the frames a sender sends (FRAMING.md: u32 length, u8 type, body),
 * the body into a reused buffer. The type's length limit is checked before
 * the body is read, and the buffer grows only as the body's bytes arrive
 * (it doubles when the bytes that came fill it): a header that claims 64 MiB
 * costs nothing until they come.
 */
final class FrameReader {
    private static final VarHandle I64 = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle I32 = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle I16 = MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.BIG_ENDIAN);

    static final int INITIAL = 64 << 10;

    private final InputStream in;
    private final byte[] header = new byte[5];
    private byte[] body = new byte[INITIAL];
    private int length;

    FrameReader(InputStream in) {
        this.in = new BufferedInputStream(in, 64 << 10);
    }

    /**
     * The largest body a sender's frame of this type may have (FRAMING.md:
     * HELLO at most 1 + 50 + 256 bytes in all, END exactly 17, BUCKET at
     * most 64 MiB), or -1 for a type a receiver does not take.
     */
    static int maxBody(int type) {
        return switch (type) {
            case ObjectFactory.HELLO -> 50 + ObjectFactory.MAX_NAME;
            case ObjectFactory.END -> 16;
            case ObjectFactory.BUCKET -> ObjectFactory.MAX_FRAME - 1;
            default -> -1;
        };
    }

    /**
     * Reads the next frame; returns its type. EOFException if the connection
     * ends (between frames or inside one); MalformedFrame for a type a sender
     * does not send there (the first frame must be a HELLO, no other may be)
     * or a length out of the type's range, both checked before any of the
     * body is read.
     */
    int next(boolean first) throws IOException, ObjectFactory.MalformedFrame {
        readFully(header, 0, 5);
        long n = u32(header, 0);
        int type = header[4] & 0xff;
        int max = maxBody(type);
        if (first && type != ObjectFactory.HELLO) {
            throw new ObjectFactory.MalformedFrame("first frame of type " + type + ", want HELLO");
        }
        if (max < 0 || (!first && type == ObjectFactory.HELLO)) {
            throw new ObjectFactory.MalformedFrame("unexpected frame type " + type);
        }
        if (n < 1 || n - 1 > max) {
            throw new ObjectFactory.MalformedFrame("frame type " + type + " of length " + n + ", out of range 1.."
                    + (max + 1));
        }
        if (type == ObjectFactory.END && n - 1 != max) {
            throw new ObjectFactory.MalformedFrame("END of " + (n - 1) + " bytes, want " + max);
        }
        int len = (int) n - 1;
        length = 0;
        for (int off = 0; off < len; ) {
            // Full of bytes that arrived: double it (never past the frame), so
            // what is allocated ahead of the bytes is at most what came.
            if (off == body.length) body = Arrays.copyOf(body, (int) Math.min(len, 2L * off));
            int r = in.read(body, off, Math.min(len, body.length) - off);
            if (r < 0) throw new EOFException();
            off += r;
        }
        length = len;
        return type;
    }

    byte[] body() {
        return body;
    }

    int length() {
        return length;
    }

    /** The body buffer's size now (for tests). */
    int capacity() {
        return body.length;
    }

    private void readFully(byte[] b, int off, int n) throws IOException {
        int end = off + n;
        while (off < end) {
            int r = in.read(b, off, end - off);
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
