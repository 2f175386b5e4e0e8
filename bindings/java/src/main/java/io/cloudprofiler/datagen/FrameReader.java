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
 * the body is read.
 *
 * <p>A frame is read in two steps, {@link #readHeader} and {@link
 * #readBody}, so that the object factory can charge a BUCKET's length to its
 * byte budget in between, before holding any of it. A body so charged is
 * read into a buffer of its length, allocated at once (the claim is paid
 * for: growing it by doubling would only cost copies and garbage). An
 * uncharged body's buffer grows only as its bytes arrive (it doubles when
 * the bytes that came fill it): a header that claims 64 MiB costs nothing
 * until they come. Either way a buffer larger than {@link #INITIAL} is
 * dropped at the next header: between frames a connection holds {@link
 * #INITIAL} bytes, not the largest frame it ever read (the budget counts a
 * frame only while it is read and its bucket queued).
 */
final class FrameReader {
    private static final VarHandle I64 = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle I32 = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle I16 = MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.BIG_ENDIAN);

    static final int INITIAL = 64 << 10;

    private final InputStream in;
    private final int maxBucketBody;
    private final byte[] header = new byte[5];
    private final byte[] small = new byte[INITIAL];
    private byte[] body = small;
    private int length;
    private int pending = -1; // the body length of the header just read, until readBody

    FrameReader(InputStream in) {
        this(in, ObjectFactory.MAX_FRAME - 1);
    }

    /**
     * A reader that refuses BUCKET bodies over {@code maxBucketBody} bytes
     * (at most FRAMING.md's 64 MiB - 1) with {@link
     * ObjectFactory.FrameOverBudget}: the factory's whole byte budget,
     * when that is smaller.
     */
    FrameReader(InputStream in, int maxBucketBody) {
        this.in = new BufferedInputStream(in, 64 << 10);
        this.maxBucketBody = Math.min(maxBucketBody, ObjectFactory.MAX_FRAME - 1);
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

    /** Reads the next frame, header and body (uncharged): {@link #readHeader}, then {@link #readBody}. */
    int next(boolean first) throws IOException, ObjectFactory.MalformedFrame {
        int type = readHeader(first);
        readBody(false);
        return type;
    }

    /**
     * Reads the next frame's header; returns its type ({@link #bodyLength()}
     * says how long its body is). EOFException if the connection ends
     * (between frames or inside one); MalformedFrame for a type a sender
     * does not send there (the first frame must be a HELLO, no other may be)
     * or a length out of the type's range, both checked before any of the
     * body is read; FrameOverBudget for a BUCKET within FRAMING.md's limit
     * but over this reader's.
     */
    int readHeader(boolean first) throws IOException, ObjectFactory.MalformedFrame {
        if (pending >= 0) throw new IllegalStateException("the body of the last frame was not read");
        if (body != small) body = small; // the last frame is done with (Deserializer: buf is reused)
        length = 0;
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
        if (type == ObjectFactory.BUCKET && n - 1 > maxBucketBody) {
            throw new ObjectFactory.FrameOverBudget("BUCKET of " + (n - 1) + " bytes, more than the object factory's"
                    + " whole budget of " + maxBucketBody + " bytes (maxQueuedBytes)");
        }
        pending = (int) n - 1;
        return type;
    }

    /** The body length of the frame whose header {@link #readHeader} just read. */
    int bodyLength() {
        if (pending < 0) throw new IllegalStateException("no header read");
        return pending;
    }

    /**
     * Reads the body of the frame whose header {@link #readHeader} read:
     * {@link #body()}, {@link #length()}. {@code charged}: the caller has
     * counted its length against a budget, so its buffer is allocated whole
     * now; else the buffer grows as the bytes arrive.
     */
    void readBody(boolean charged) throws IOException {
        int len = bodyLength();
        pending = -1; // a body cut short ends the connection: the reader is not used again
        if (charged && len > body.length) body = new byte[len];
        for (int off = 0; off < len; ) {
            // Full of bytes that arrived: double it (never past the frame), so
            // what is allocated ahead of the bytes is at most what came.
            if (off == body.length) body = Arrays.copyOf(body, (int) Math.min(len, 2L * off));
            int r = in.read(body, off, Math.min(len, body.length) - off);
            if (r < 0) throw new EOFException();
            off += r;
        }
        length = len;
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
