package io.cloudprofiler.datagen;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.util.Arrays;

import org.junit.jupiter.api.Test;

/** FRAMING.md's per-type limits, checked before the body; the buffer grows only as bytes arrive. */
class FrameReaderTest {
    static byte[] header(long length, int type) {
        return new byte[] {(byte) (length >>> 24), (byte) (length >>> 16), (byte) (length >>> 8), (byte) length, (byte) type};
    }

    static byte[] concat(byte[]... parts) {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        for (byte[] p : parts) b.writeBytes(p);
        return b.toByteArray();
    }

    static FrameReader reader(byte[]... parts) {
        return new FrameReader(new ByteArrayInputStream(concat(parts)));
    }

    /** Refused from the header alone: no body follows, so reading one would be an EOFException instead. */
    static String refused(boolean first, long length, int type) {
        return assertThrows(ObjectFactory.MalformedFrame.class, () -> reader(header(length, type)).next(first)).getMessage();
    }

    @Test
    void perTypeLimitsBeforeTheBody() throws Exception {
        assertTrue(refused(true, 1 + 50 + 256 + 1, ObjectFactory.HELLO).contains("out of range 1..307"));
        assertTrue(refused(true, 0, ObjectFactory.HELLO).contains("length 0"));
        assertTrue(refused(false, 16, ObjectFactory.END).contains("END of 15 bytes"));
        assertTrue(refused(false, 18, ObjectFactory.END).contains("out of range"));
        assertTrue(refused(false, (64 << 20) + 1, ObjectFactory.BUCKET).contains("out of range"));
        assertTrue(refused(false, 0xffffffffL, ObjectFactory.BUCKET).contains("out of range"));
        assertTrue(refused(false, 5, ObjectFactory.REPORT).contains("unexpected frame type 4"));
        assertTrue(refused(false, 5, 0).contains("unexpected frame type 0"));
        assertTrue(refused(false, 300, ObjectFactory.HELLO).contains("unexpected frame type 1"), "a second HELLO");
        assertTrue(refused(true, 1 << 20, ObjectFactory.BUCKET).contains("first frame of type 2, want HELLO"));
        // at the limits: the body is read
        assertThrows(EOFException.class, () -> reader(header(307, ObjectFactory.HELLO)).next(true));
        assertThrows(EOFException.class, () -> reader(header(17, ObjectFactory.END)).next(false));
        assertThrows(EOFException.class, () -> reader(header(64 << 20, ObjectFactory.BUCKET)).next(false));
        FrameReader r = reader(header(307, ObjectFactory.HELLO), new byte[306], header(17, ObjectFactory.END), new byte[16],
                header(1, ObjectFactory.BUCKET));
        assertEquals(ObjectFactory.HELLO, r.next(true));
        assertEquals(306, r.length());
        assertEquals(ObjectFactory.END, r.next(false));
        assertEquals(16, r.length());
        assertEquals(ObjectFactory.BUCKET, r.next(false));
        assertEquals(0, r.length());
        assertThrows(EOFException.class, () -> r.next(false));
    }

    @Test
    void aClaimedLengthCostsNothingUntilItsBytesCome() throws Exception {
        // A header that claims 64 MiB, then 100 bytes, then the connection ends.
        FrameReader r = reader(header(64 << 20, ObjectFactory.BUCKET), new byte[100]);
        assertThrows(EOFException.class, () -> r.next(false));
        assertEquals(FrameReader.INITIAL, r.capacity());
        // 300 KiB of a claimed 64 MiB: the buffer is at most twice what came.
        FrameReader s = reader(header(64 << 20, ObjectFactory.BUCKET), new byte[300 << 10]);
        assertThrows(EOFException.class, () -> s.next(false));
        assertTrue(s.capacity() <= 2 * (300 << 10), "capacity " + s.capacity());
    }

    @Test
    void aLargeBodyArrivingInPiecesIsReadWhole() throws Exception {
        int n = (3 << 20) + 12345;
        byte[] body = new byte[n];
        for (int i = 0; i < n; i++) body[i] = (byte) (i * 31 + (i >>> 12));
        byte[] all = concat(header(n + 1, ObjectFactory.BUCKET), body, header(1 + 4, ObjectFactory.BUCKET), new byte[] {1, 2, 3, 4});
        // a stream that returns at most 1000 bytes per read
        InputStream trickle = new ByteArrayInputStream(all) {
            @Override
            public synchronized int read(byte[] b, int off, int len) {
                return super.read(b, off, Math.min(len, 1000));
            }
        };
        FrameReader r = new FrameReader(trickle);
        assertEquals(ObjectFactory.BUCKET, r.next(false));
        assertEquals(n, r.length());
        assertArrayEquals(body, Arrays.copyOf(r.body(), n));
        assertTrue(r.capacity() >= n && r.capacity() <= 2 * n);
        assertEquals(ObjectFactory.BUCKET, r.next(false));
        assertEquals(4, r.length());
        assertArrayEquals(new byte[] {1, 2, 3, 4}, Arrays.copyOf(r.body(), 4));
    }

    @Test
    void aBucketOverTheReadersBudgetIsRefusedFromItsHeader() throws Exception {
        // the factory's budget (1000 bytes here) bounds a BUCKET's body, checked before any of it is read
        FrameReader r = new FrameReader(new ByteArrayInputStream(header(1001 + 1, ObjectFactory.BUCKET)), 1000);
        ObjectFactory.MalformedFrame e = assertThrows(ObjectFactory.FrameOverBudget.class, () -> r.readHeader(false));
        assertEquals("BUCKET of 1001 bytes, more than the object factory's whole budget of 1000 bytes (maxQueuedBytes)",
                e.getMessage());
        // at the budget: read; HELLO and END are not bounded by it
        FrameReader s = new FrameReader(new ByteArrayInputStream(concat(header(307, ObjectFactory.HELLO), new byte[306],
                header(1000 + 1, ObjectFactory.BUCKET), new byte[1000], header(17, ObjectFactory.END), new byte[16])), 1000);
        assertEquals(ObjectFactory.HELLO, s.next(true));
        assertEquals(ObjectFactory.BUCKET, s.next(false));
        assertEquals(1000, s.length());
        assertEquals(ObjectFactory.END, s.next(false));
        FrameReader t = new FrameReader(new ByteArrayInputStream(header(17, ObjectFactory.END)), 10);
        assertEquals(ObjectFactory.END, t.readHeader(false));
    }

    @Test
    void headerThenBodyAndTheLargeBufferIsDroppedAfterItsFrame() throws Exception {
        int n = 1 << 20;
        FrameReader r = reader(header(n + 1, ObjectFactory.BUCKET), new byte[n], header(4 + 1, ObjectFactory.BUCKET),
                new byte[] {1, 2, 3, 4}, header(n + 1, ObjectFactory.BUCKET), new byte[n]);
        assertThrows(IllegalStateException.class, () -> r.readBody(true), "no header yet");
        assertEquals(ObjectFactory.BUCKET, r.readHeader(false));
        assertEquals(n, r.bodyLength());
        assertEquals(FrameReader.INITIAL, r.capacity(), "nothing of the body held before readBody");
        assertThrows(IllegalStateException.class, () -> r.readHeader(false), "the body first");
        r.readBody(true); // charged to a budget: allocated whole
        assertEquals(n, r.length());
        assertEquals(n, r.capacity());
        assertEquals(ObjectFactory.BUCKET, r.readHeader(false));
        assertEquals(FrameReader.INITIAL, r.capacity(), "the 1 MiB buffer went with its frame");
        r.readBody(true);
        assertArrayEquals(new byte[] {1, 2, 3, 4}, Arrays.copyOf(r.body(), 4));
        assertEquals(ObjectFactory.BUCKET, r.next(false)); // uncharged: grown by doubling as the bytes came
        assertEquals(n, r.length());
        assertEquals(n, r.capacity());
    }

    /** A charged body is allocated whole, but read as it comes: a cut one is an EOF, as ever. */
    @Test
    void aChargedBodyCutShortIsAnEof() throws Exception {
        FrameReader r = reader(header(300_001, ObjectFactory.BUCKET), new byte[1000]);
        r.readHeader(false);
        assertThrows(EOFException.class, () -> r.readBody(true));
        assertEquals(300_000, r.capacity());
    }

    @Test
    void aCutHeaderIsAnEof() {
        assertThrows(EOFException.class, () -> reader(new byte[] {0, 0, 0}).next(true));
        assertThrows(IOException.class, () -> reader().next(true));
    }
}
